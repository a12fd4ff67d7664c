"""No inventory value can add, remove or bend a directive of the sglang_service unit.

The template is rendered with hostile values for every variable that reaches it and
the result is read as systemd reads it (lines, continuations, sections, quoting,
specifiers, $-expansion): the directives must be exactly those of a plain render, and
every value must come back as written. A value no quoting can carry (a newline, a
trailing backslash) must stop the render with the variable's name. The ExecStart
script is also run by bash, to prove the server and the log filter get the argv meant.
"""
import json
import os
import shutil
import subprocess

import pytest

from conftest import (TEST_API_KEY, environment, failures_by_host, exec_start_argv, group_vars, parse_unit, render_units,
                      resolve_specifiers, run_render, setting)

NASTY = "it's \"q\" $HOME ${PATH} $$ %n %% `id` ; \\ \\n #x ;y"
INJECTED = "\nExecStartPre=+/bin/sh -c 'id > /tmp/pwned'\n[Service]\nUser=root"

# The production inventory, shaped like HOSTILE below (same entries, plain values).
PLAIN = dict(group_vars("production"), vault_sglang_api_key=TEST_API_KEY,
             sglang_service_runtime_directory="sglang-run",
             sglang_service_cache_env={"SGLANG_CACHE_DIR": "/var/cache/sglang"},
             sglang_service_nccl_env={"NCCL_DEBUG": "WARN"},
             sglang_service_extra_env={"EXTRA": "1", "EMPTY": ""},
             sglang_service_extra_args=[["--chat-template", "/etc/t.jinja"], "--x=1", ["a", "b", "c"]],
             sglang_service_device_allow=["/dev/nvidiactl rw", "char-nvidia-uvm rw"],
             sglang_service_system_call_filter=["@system-service", "@mount"])

# Every variable the template reads, with a hostile value it must carry unchanged.
HOSTILE = {
    "sglang_service_unit_name": "k26%n$x'\"",
    "sglang_service_served_model_name": "kimi " + NASTY,
    "sglang_service_model_path": "/models/" + NASTY,
    "sglang_service_user": "sglang%u$x",
    "sglang_service_group": "sglang%g'x",
    "sglang_service_state_dir": "/var/lib/sglang%h$x'\"",
    "sglang_service_python": "/opt/" + NASTY + "/bin/python",
    "sglang_service_cache_env": {"SGLANG_CACHE_DIR": "/var/cache/%h$x\"'"},
    "sglang_service_nccl_env": {"NCCL_DEBUG": NASTY},
    "sglang_service_extra_env": {"EXTRA": NASTY, "EMPTY": ""},
    "sglang_service_host": "0.0.0.0 %H $x",
    "sglang_service_speculative_draft_model_path": "/draft/" + NASTY,
    "sglang_service_tool_call_parser": "kimi " + NASTY,
    "sglang_service_reasoning_parser": "kimi " + NASTY,
    "sglang_service_extra_args": [["--chat-template", NASTY], "--x=$(reboot)", [";", "&&", ""]],
    "sglang_service_config_dir": "/etc/" + NASTY,
    "sglang_service_api_key": "key " + NASTY,
    "sglang_service_limit_nofile": "1048576 %n",
    "sglang_service_limit_memlock": "infinity %n",
    "sglang_service_runtime_directory": "sglang%n$x",
    "sglang_service_device_allow": ["/dev/nvidia%n rw", "char-x$y rw"],
    "sglang_service_system_call_filter": ["@system-service", "@mount%n"],
    "sglang_service_start_limit_interval_s": "3600\nExecStartPre=+/bin/true",
    "sglang_service_start_limit_burst": "3 %n",
    "sglang_service_timeout_stop_s": "$x",
    "sglang_service_restart_sec": "30\\",
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    units = render_units(tmp_path_factory.mktemp("hostile"), {
        "plain": PLAIN, "hostile": dict(PLAIN, **HOSTILE),
        "hostile-bash": dict(PLAIN, sglang_service_supervisor=False, **HOSTILE)})
    return {name: text for name, (text, _config) in units.items()}


def directives(unit_text):
    return [(section, key) for section, key, _ in parse_unit(unit_text)]


def test_hostile_values_give_exactly_the_directives_of_a_plain_render(rendered):
    assert directives(rendered["hostile"]) == directives(rendered["plain"])


def test_no_directive_runs_anything_before_or_as_root(rendered):
    keys = {key for _, key, _ in parse_unit(rendered["hostile"])}
    assert not keys & {"ExecStartPre", "ExecStartPost", "ExecStop", "ExecReload", "PermissionsStartOnly"}
    assert setting(rendered["hostile"], "Service", "User") == ["sglang%%u$x"]


@pytest.mark.parametrize("section, key, variable", [
    ("Unit", "Description", None),
    ("Service", "User", "sglang_service_user"),
    ("Service", "Group", "sglang_service_group"),
    ("Service", "WorkingDirectory", "sglang_service_state_dir"),
    ("Service", "RuntimeDirectory", "sglang_service_runtime_directory"),
    ("Service", "LimitNOFILE", "sglang_service_limit_nofile"),
    ("Service", "LimitMEMLOCK", "sglang_service_limit_memlock"),
    ("Service", "SyslogIdentifier", "sglang_service_unit_name"),
])
def test_verbatim_settings_come_back_as_written(rendered, section, key, variable):
    (raw,) = setting(rendered["hostile"], section, key)
    expected = (HOSTILE[variable] if variable else
                "SGLang server %s (%s)" % (HOSTILE["sglang_service_unit_name"], HOSTILE["sglang_service_served_model_name"]))
    assert resolve_specifiers(raw) == expected


def test_list_settings_come_back_item_by_item(rendered):
    unit = rendered["hostile"]
    assert [resolve_specifiers(v) for v in setting(unit, "Service", "DeviceAllow")] == HOSTILE["sglang_service_device_allow"]
    (filters,) = setting(unit, "Service", "SystemCallFilter")
    assert resolve_specifiers(filters).split(" ") == HOSTILE["sglang_service_system_call_filter"]


def test_numbers_are_rendered_as_numbers(rendered):
    unit = rendered["hostile"]
    for key in ("StartLimitIntervalSec", "StartLimitBurst"):
        (value,) = setting(unit, "Unit", key)
        assert value.isdigit(), (key, value)
    for key in ("TimeoutStopSec", "RestartSec"):
        (value,) = setting(unit, "Service", key)
        assert value.isdigit(), (key, value)


def test_environment_comes_back_as_written(rendered):
    env = environment(rendered["hostile"])
    for source in ("sglang_service_cache_env", "sglang_service_nccl_env", "sglang_service_extra_env"):
        for name, value in HOSTILE[source].items():
            assert env[name] == value, name
    assert env["PYTHONUNBUFFERED"] == "1"


@pytest.mark.parametrize("host", ["hostile", "hostile-bash"])
def test_exec_start_hands_the_server_every_flag_as_written(rendered, host):
    argv = exec_start_argv(rendered[host])
    if host == "hostile-bash":
        assert argv[:2] == ["/bin/bash", "-c"]
        argv = argv[3:]
    else:
        config_dir, unit = HOSTILE["sglang_service_config_dir"], HOSTILE["sglang_service_unit_name"]
        assert argv[3:6] == ["--settings", config_dir + "/" + unit + ".supervisor.json", "--"]
        argv = argv[6:]
    assert argv[:3] == [HOSTILE["sglang_service_python"], "-m", "sglang.launch_server"]
    flags = argv[3:]
    assert flags[:2] == ["--config", HOSTILE["sglang_service_config_dir"] + "/" + HOSTILE["sglang_service_unit_name"] + ".yaml"]
    for flag, variable in (("--model-path", "sglang_service_model_path"), ("--host", "sglang_service_host"),
                           ("--served-model-name", "sglang_service_served_model_name"),
                           ("--speculative-draft-model-path", "sglang_service_speculative_draft_model_path"),
                           ("--tool-call-parser", "sglang_service_tool_call_parser"),
                           ("--reasoning-parser", "sglang_service_reasoning_parser")):
        assert flags[flags.index(flag) + 1] == HOSTILE[variable], flag
    assert flags[-6:] == ["--chat-template", NASTY, "--x=$(reboot)", ";", "&&", ""]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_runs_the_server_and_the_log_filter_with_the_argv_meant(rendered, tmp_path):
    """The ExecStart script, run by bash as systemd would, with a recorder in place of Python."""
    recorder = tmp_path / "python"
    recorder.write_text("#!/usr/bin/env python3\nimport json, sys\nprint(json.dumps(sys.argv[1:]), flush=True)\n"
                        "if sys.argv[1:2] == ['-I']:\n    sys.stdout.write(sys.stdin.read())\n")
    recorder.chmod(0o755)
    argv = exec_start_argv(rendered["hostile-bash"])
    run = subprocess.run(["/bin/bash", "-c", argv[2], str(recorder)] + argv[4:], capture_output=True, text=True,
                         timeout=30, check=False)
    assert run.returncode == 0, run.stderr
    filter_argv, server_argv = [json.loads(line) for line in run.stdout.splitlines()]
    config = HOSTILE["sglang_service_config_dir"] + "/" + HOSTILE["sglang_service_unit_name"] + ".yaml"
    assert filter_argv == ["-I", "/usr/local/libexec/sglang-ops/sglang-log-filter", config]
    assert server_argv == argv[4:]


def systemd_analyze_verify(path):
    run = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True, check=False,
                         env=dict(os.environ, SYSTEMD_LOG_LEVEL="warning"))
    return [line for line in run.stderr.splitlines() if path.name + ":" in line]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_verify_accepts_the_plain_unit_and_reads_no_new_setting_in_the_hostile_one(rendered, tmp_path):
    plain, hostile = tmp_path / "sglang-plain.service", tmp_path / "sglang-hostile.service"
    plain.write_text(rendered["plain"])
    hostile.write_text(rendered["hostile"])
    assert systemd_analyze_verify(plain) == []
    # The hostile values are nonsense to systemd (a user named "sglang%u$x"), so it may refuse
    # them as values; it must never meet a setting or section the role did not write.
    structural = [line for line in systemd_analyze_verify(hostile)
                  if "Unknown key" in line or "Unknown section" in line or "Missing '='" in line
                  or "ExecStartPre" in line or "assignment outside of section" in line]
    assert structural == []


UNQUOTABLE = {
    "sglang_service_served_model_name": "kimi" + INJECTED,
    "sglang_service_model_path": "/models/k2" + INJECTED,
    "sglang_service_user": "sglang" + INJECTED,
    "sglang_service_state_dir": "/var/lib/sglang" + INJECTED,
    "sglang_service_python": "/opt/venv/bin/python\r[Service]",
    "sglang_service_cache_env": {"SGLANG_CACHE_DIR": "/var/cache" + INJECTED},
    "sglang_service_extra_env": {"EXTRA" + INJECTED: "1"},
    "sglang_service_nccl_env": {"NCCL_DEBUG": "WARN\\"},
    "sglang_service_extra_args": [["--chat-template", "x" + INJECTED]],
    "sglang_service_limit_nofile": "1048576" + INJECTED,
    "sglang_service_runtime_directory": "sglang" + INJECTED,
    "sglang_service_device_allow": ["/dev/nvidiactl rw" + INJECTED],
    "sglang_service_system_call_filter": ["@system-service" + INJECTED],
    "sglang_service_config_dir": "/etc/sglang" + INJECTED,
    "sglang_service_host": "0.0.0.0\x00",
}


@pytest.fixture(scope="module")
def unquotable_renders(tmp_path_factory):
    hosts = {variable.replace("_", "-"): dict(PLAIN, **{variable: value}) for variable, value in UNQUOTABLE.items()}
    run, out_dir = run_render(tmp_path_factory.mktemp("unquotable"), hosts)
    result = json.loads(run.stdout[run.stdout.index("{"):])
    failed = {host: found[-1][2] for host, found in failures_by_host(result).items()}
    return failed, out_dir


@pytest.mark.parametrize("variable", sorted(UNQUOTABLE))
def test_a_value_no_quoting_can_carry_stops_the_render_naming_the_variable(unquotable_renders, variable):
    failed, out_dir = unquotable_renders
    host = variable.replace("_", "-")
    assert host in failed, "rendered: " + (out_dir / f"{host}.service").read_text()
    assert variable in failed[host] or "server flag" in failed[host], failed[host]
    assert not (out_dir / f"{host}.service").exists()
