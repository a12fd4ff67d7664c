"""The restart action's options: every number finite and within a sane range, refused
before anything runs on a host, with the option named."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.sglang_ops.serving.plugins.action.sglang_restart import (
    ARGUMENT_SPEC, _arg_problems, _server_problem)

ROOT = Path(__file__).resolve().parents[3]


def options(**overrides):
    args = {name: spec.get("default") for name, spec in ARGUMENT_SPEC.items()}
    args.update(overrides)
    return args


def test_the_defaults_pass():
    assert _arg_problems(options()) == []


@pytest.mark.parametrize("overrides, words", [
    ({"poll_s": float("nan")}, "poll_s must be a finite number, got nan"),
    ({"poll_s": 0.0}, "poll_s must be > 0"),
    ({"poll_s": 7200.0}, "poll_s must be > 0 and at most 3600"),
    ({"start_timeout_s": float("inf")}, "start_timeout_s must be a finite number, got inf"),
    ({"stop_timeout_s": -1.0}, "stop_timeout_s must be > 0"),
    ({"release_timeout_s": float("inf")}, "release_timeout_s must be a finite number"),
    ({"failed_stop_timeout_s": 0.0}, "failed_stop_timeout_s must be > 0"),
    ({"backoff_base_s": -5.0}, "backoff_base_s must be >= 0"),
    ({"backoff_max_s": float("nan")}, "backoff_max_s must be a finite number"),
    ({"max_attempts": 0}, "max_attempts must be >= 1 and at most 20, got 0"),
    ({"max_attempts": 1000}, "max_attempts must be >= 1 and at most 20"),
    ({"gpu_idle_mib": -1}, "gpu_idle_mib must be >= 0"),
    ({"prewarm": {"step_s": "nan"}}, "prewarm.step_s must be a finite number"),
    ({"prewarm": {"max_total_s": -1}}, "prewarm.max_total_s must be >= 0"),
    ({"prewarm": {"step_s": "soon"}}, "prewarm.step_s must be a number, got 'soon'"),
])
def test_out_of_range_options_are_named(overrides, words):
    assert any(words in problem for problem in _arg_problems(options(**overrides))), _arg_problems(
        options(**overrides))


def test_a_nan_poll_fails_the_real_task_before_touching_the_host(tmp_path):
    # The action through ansible itself (argument spec conversion included): "nan" becomes
    # a float NaN there, and the task must fail naming it, with no connection made.
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    run = subprocess.run(
        [str(Path(sys.executable).parent / "ansible"), "no-such-host", "-i", "no-such-host,",
         "-e", "ansible_connection=ssh ansible_host=192.0.2.1", "-m", "sglang_ops.serving.sglang_restart",
         "-a", json.dumps({"poll_s": "nan", "detector": {"stall_idle_window_s": -5}, "artifacts_dir": str(tmp_path)})],
        env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "poll_s must be a finite number, got nan" in run.stdout, run.stdout + run.stderr
    assert "detector setting stall_idle_window_s must be > 0" in run.stdout
    assert "UNREACHABLE" not in run.stdout
    assert not os.listdir(tmp_path)  # no run folder either


def test_the_documented_defaults_are_the_action_defaults():
    import yaml

    from ansible_collections.sglang_ops.serving.plugins.modules import sglang_restart as doc

    documented = yaml.safe_load(doc.DOCUMENTATION)["options"]
    assert set(documented) == set(ARGUMENT_SPEC)
    for name, spec in ARGUMENT_SPEC.items():
        assert documented[name].get("default") == spec.get("default"), name


@pytest.mark.parametrize("server, words", [
    ({}, None),
    ({"name": "pair", "nodes": ["node-a", "node-b"]}, None),
    ({"name": "pair"}, "server needs exactly name, nodes, got name"),
    ({"name": "pair", "nodes": ["node-a", "node-b"], "run": "x"}, "server needs exactly name, nodes"),
    ({"name": "pair", "nodes": ["node-a"]}, "at least two, each once"),
    ({"name": "pair", "nodes": ["node-a", "node-a"]}, "at least two, each once"),
    ({"name": "pair", "nodes": "node-a,node-b"}, "server.nodes must list"),
    ({"name": "pair", "nodes": ["node-b", "node-c"]}, "node-a is not one of server.nodes (node-b, node-c)"),
    ({"name": " ", "nodes": ["node-a", "node-b"]}, "server.name must not be empty"),
])
def test_the_server_option_is_checked_before_anything_runs(server, words):
    problem = _server_problem(server, "node-a")
    assert problem is None if words is None else words in problem, problem


def test_a_server_with_more_nodes_than_forks_is_refused(monkeypatch):
    from ansible import context
    monkeypatch.setattr(context, "CLIARGS", {"forks": 2})
    problem = _server_problem({"name": "quad", "nodes": ["node-a", "b", "c", "d"]}, "node-a")
    assert "server quad has 4 nodes" in problem and "raise forks to at least 4" in problem
