"""bin/sglang-ops replay, run as an operator runs it: the system python3, no virtualenv."""
import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BIN = os.path.join(ROOT, "bin", "sglang-ops")
PYTHON = shutil.which("python3") or sys.executable
TRACE = os.path.join(ROOT, "tests", "traces", "failed_oom_graph_capture_new_family.jsonl")


def run(*args):
    return subprocess.run([PYTHON, BIN, *args], capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_last_stdout_line_is_the_verdict_json():
    p = run("replay", TRACE)
    assert p.returncode == 0, p.stderr
    verdict = json.loads(p.stdout.strip().splitlines()[-1])
    assert verdict["verdict"] == "failed" and verdict["reason_code"] == "fatal_oom"
    assert verdict["phase"] == "cuda_graph" and isinstance(verdict["t"], float) and verdict["reason"]


def test_verbose_prints_one_timeline_line_per_observation_before_the_verdict():
    p = run("replay", "--verbose", TRACE)
    lines = p.stdout.strip().splitlines()
    assert len(lines) > 10 and "\u00b7" in lines[0]
    assert json.loads(lines[-1])["verdict"] == "failed"


def test_settings_can_be_overridden_from_the_command_line(tmp_path):
    trace = os.path.join(ROOT, "tests", "traces", "stall_capture_error_swallowed_idle.jsonl")
    default = json.loads(run("replay", trace).stdout.splitlines()[-1])
    shorter = json.loads(run("replay", trace, "--set", "stall_frozen_window_s=60").stdout.splitlines()[-1])
    assert default["reason_code"] == shorter["reason_code"] == "stall_idle"
    assert shorter["t"] < default["t"]


def test_an_unknown_setting_exits_2_naming_it():
    p = run("replay", TRACE, "--set", "no_such_window_s=3")
    assert p.returncode == 2 and "no_such_window_s" in p.stderr


def test_a_trace_that_ends_early_is_undecided(tmp_path):
    path = tmp_path / "short.jsonl"
    with open(TRACE) as src:
        path.write_text("".join(src.readlines()[:4]))
    v = json.loads(run("replay", str(path)).stdout.splitlines()[-1])
    assert v["verdict"] == "undecided"


@pytest.mark.parametrize("content, line_no", [
    ('{"format": "sglang-trace/1", "poll_s": 10}\n{"t": 1}\n{"t": oops}\n', 3),
    ('{"t": 1}\n', 1),
    ('{"format": "sglang-trace/1", "poll_s": 10}\n{"t": 5}\n{"t": 4}\n', 3),
])
def test_a_malformed_trace_gets_one_clear_line_and_exit_2(tmp_path, content, line_no):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    p = run("replay", str(path))
    assert p.returncode == 2 and p.stdout == ""
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and "%s:%d:" % (path, line_no) in err[0]


def test_a_missing_file_exits_2():
    p = run("replay", "/nonexistent/trace.jsonl")
    assert p.returncode == 2 and "/nonexistent/trace.jsonl" in p.stderr


def test_the_cli_does_not_import_ansible():
    code = ("import runpy, sys; sys.argv=['sglang-ops','replay',%r]\n"
            "try:\n    runpy.run_path(%r, run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print('ANSIBLE' if any(m == 'ansible' or m.startswith('ansible.') for m in sys.modules) else 'CLEAN')") % (TRACE, BIN)
    p = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, cwd="/", timeout=60)
    assert p.stdout.strip().splitlines()[-1] == "CLEAN", p.stderr


def test_a_new_subcommand_is_one_name_in_the_registry():
    sys.path[:0] = [ROOT]
    from sglang_ops_cli import cli
    parser = cli.build_parser(("replay",))
    assert parser.parse_args(["replay", "x.jsonl"]).file == "x.jsonl"
    assert "replay" in cli.SUBCOMMANDS
