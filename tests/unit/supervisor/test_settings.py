"""The supervisor's settings file, proven whole before anything is started."""
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.sglang_ops.serving.plugins.filter.restart_prevent_exit_statuses import (
    restart_prevent_exit_statuses as rendered_prevent_statuses)
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import failure_classes as fc
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.supervisor_settings import SupervisorSettings

from .conftest import supervisor_command

# What the sglang_service role writes (roles/sglang_service/vars/main.yml), with its defaults.
ROLE_SETTINGS = {"unit": "sglang-k26-ddtree", "base_url": "http://[::1]:30001", "model": "kimi-k2.6",
                 "api_key_file": "/etc/sglang/sglang-k26-ddtree.yaml", "starts_dir": "/var/lib/sglang-ops/starts",
                 "keep_starts": 20, "poll_s": 10.0, "detector": {"stall_idle_window_s": 600},
                 "extend_timeout_s": 600.0, "stop_timeout_s": 110.0, "liveness_interval_s": 30.0,
                 "liveness_timeout_s": 60.0, "liveness_misses": 3, "stacks": True, "venv_bin": "/opt/sglang/venv/bin",
                 "metrics_dir": None}

BAD = [
    ("keep_starts", "abc", "must be an integer"),
    ("keep_starts", 0, "must be an integer >= 1"),
    ("keep_starts", 2.5, "must be an integer"),
    ("base_url", 5, "must be a string"),
    ("base_url", "ftp://127.0.0.1:30001", "http:// or https:// URL"),
    ("base_url", "http://", "URL with a host"),
    ("base_url", "http://127.0.0.1:port", "valid port"),
    ("poll_s", True, "must be a number"),
    ("poll_s", 0, "must be > 0"),
    ("start_timeout_s", -1, "must be >= 0"),
    ("liveness_misses", 0, "must be an integer >= 1"),
    ("stacks", "yes", "true or false"),
    ("starts_dir", "var/lib/starts", "absolute path"),
    ("api_key_file", 3, "must be a string"),
    ("metrics_dir", "", "must not be empty"),
    ("unit", "sglang\nx", "control characters"),
    ("model", None, "must be a string"),
    ("detector", {"stall_idle_window_s": "soon"}, "stall_idle_window_s"),
    ("detector", [], "JSON object"),
]


def test_the_settings_the_role_writes_are_accepted():
    settings = SupervisorSettings.from_dict(ROLE_SETTINGS, "/etc/sglang/u.supervisor.json")
    assert settings.keep_starts == 20 and settings.base_url == "http://[::1]:30001"


@pytest.mark.parametrize("name,value,words", BAD, ids=["%s=%r" % (n, v) for n, v, dummy_w in BAD])
def test_a_wrongly_typed_or_out_of_range_setting_is_named_with_its_file_and_problem(name, value, words):
    with pytest.raises(ValueError) as err:
        SupervisorSettings.from_dict(dict(ROLE_SETTINGS, **{name: value}), "/etc/sglang/u.supervisor.json")
    message = str(err.value)
    assert message.startswith(name + " in /etc/sglang/u.supervisor.json ") and words in message, message
    assert "\n" not in message


def test_a_number_json_cannot_hold_is_refused(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('{"poll_s": NaN}')
    with pytest.raises(ValueError, match="poll_s in .* must be a finite number"):
        SupervisorSettings.load(str(path))


def test_bad_settings_exit_with_a_status_systemd_does_not_restart_and_start_nothing(tmp_path):
    started = tmp_path / "server-started"
    server = ["/bin/sh", "-c", "touch %s" % started]
    for bad in ({"keep_starts": "abc"}, {"base_url": 5}, {"poll_s": 0}, {"no_such": 1}, [1, 2]):
        path = tmp_path / "s.json"
        path.write_text(json.dumps(bad))
        res = subprocess.run(supervisor_command(path, server), capture_output=True, text=True, check=False)
        assert res.returncode == fc.exit_code("supervisor_config") == 64, res.stderr
        assert res.stderr.count("\n") == 1 and str(path) in res.stderr and "Traceback" not in res.stderr, res.stderr
        key = next(iter(bad)) if isinstance(bad, dict) else "JSON object"
        assert key in res.stderr, res.stderr
        assert res.stdout == "" and not os.path.exists(started)
    # the unit's RestartPreventExitStatus= is rendered from these classes (plugins/filter)
    assert {fc.exit_code("supervisor_config"), fc.exit_code("supervisor_fault")} <= set(rendered_prevent_statuses())


def test_a_usage_error_is_one_line_and_the_config_status():
    res = subprocess.run([sys.executable, "-I", "-S", supervisor_command("x", [])[3], "--settings"],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 64 and res.stderr.startswith("usage: ") and res.stderr.count("\n") == 1
