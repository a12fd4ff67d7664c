"""restart/status through ansible-runner: live lines stream, outcomes map to exit statuses.

Runs a tiny playbook (fixtures/) on localhost with a connection-local host and a host whose
SSH port (31399) is closed; its action plugin prints progress lines with display.display()
as the restart action does."""
import argparse
import io
import os

import pytest

from sglang_ops_cli import playbook_command, playbook_run
from sglang_ops_cli.cli import main
from sglang_ops_cli.commands import restart, status

HERE = os.path.dirname(os.path.abspath(__file__))
PLAYBOOK = os.path.join(HERE, "fixtures", "playbook.yml")
INVENTORY = os.path.join(HERE, "fixtures", "inventory.ini")


def _args(*argv):
    parser = argparse.ArgumentParser()
    playbook_command.add_arguments(parser)
    return parser.parse_args(["-i", INVENTORY] + list(argv))


def _run(*argv, need_ready=False):
    out, err = io.StringIO(), io.StringIO()
    code = playbook_command.run(_args(*argv), PLAYBOOK, need_ready_verdict=need_ready, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_progress_lines_stream_before_the_task_result_and_ready_exits_0():
    code, out, err = _run("--limit", "local")
    assert code == 0, out + err
    lines = out.splitlines()
    progress = [i for i, line in enumerate(lines) if "progress-line" in line]
    assert [lines[i] for i in progress] == ["local progress-line %d · GPU %d/96 GB" % (n, 10 * n) for n in (1, 2, 3)]
    ok = lines.index("ok: [local]")
    recap = [i for i, line in enumerate(lines) if line.startswith("PLAY RECAP")][0]
    assert progress[-1] < ok < recap
    assert "\x1b[" not in out


def test_a_failed_task_exits_1_and_names_the_host():
    code, out, err = _run("--limit", "local", "-e", "demo_fail=true")
    assert code == 1
    assert "failed: local" in err
    assert "gave up: same failure twice" in out
    assert out.splitlines()[-1] == "incident report for local: /tmp/a/h/s/report.md"


def test_an_unreachable_host_exits_4_even_when_another_is_fine():
    code, out, err = _run("--limit", "all")
    assert code == 4
    assert "unreachable: gone" in err


def test_status_exits_3_when_a_reachable_host_is_not_ready():
    code, _, err = _run("--limit", "local", "-e", "demo_verdict=quiet", need_ready=True)
    assert code == 3
    assert "local=quiet" in err


def test_bad_extra_vars_and_missing_inventory_are_usage_errors():
    assert _run("-e", "no_equals_sign")[0] == 2
    parser = argparse.ArgumentParser()
    playbook_command.add_arguments(parser)
    err = io.StringIO()
    args = parser.parse_args(["-i", os.path.join(HERE, "no-such-inventory")])
    assert playbook_command.run(args, PLAYBOOK, False, out=io.StringIO(), err=err) == 2
    assert "does not exist" in err.getvalue()


def test_without_ansible_runner_and_no_venv_to_switch_to_the_message_says_what_to_do(monkeypatch):
    monkeypatch.setattr(playbook_command, "ansible_runner_available", lambda: False)
    err = io.StringIO()
    assert playbook_command.ensure_ansible_runner(argv=["<no script>"], err=err) == 2
    assert "ansible-runner is not installed" in err.getvalue()
    assert "bootstrap-venv" in err.getvalue()


def test_without_ansible_runner_the_command_re_executes_in_the_project_venv(monkeypatch, tmp_path):
    """The project venv's python is a link to the base interpreter, so the decision rests on
    sys.prefix, not on the binary."""
    script = tmp_path / "sglang-ops"
    script.write_text("#")
    fake_venv_python = tmp_path / "python"
    fake_venv_python.write_text("#!/bin/sh\n")
    fake_venv_python.chmod(0o755)
    calls = []
    monkeypatch.setattr(playbook_command, "ansible_runner_available", lambda: False)
    monkeypatch.setattr(playbook_command, "VENV_PYTHON", str(fake_venv_python))
    monkeypatch.setattr(playbook_command, "VENV_DIR", str(tmp_path / "venv"))
    monkeypatch.delenv("SGLANG_OPS_REEXEC", raising=False)
    monkeypatch.setattr(os, "execv", lambda exe, argv: calls.append((exe, argv)))
    playbook_command.ensure_ansible_runner(argv=[str(script), "restart", "--limit", "h"], err=io.StringIO())
    assert calls == [(str(fake_venv_python), [str(fake_venv_python), str(script), "restart", "--limit", "h"])]


def test_extra_vars_become_typed_values():
    assert playbook_run.parse_extravars(["a=1", "b=true", "c=x=y", "d=0.5"]) == {"a": 1, "b": True, "c": "x=y", "d": 0.5}


def test_restart_and_status_run_their_own_playbooks():
    assert restart.PLAYBOOK.endswith(os.path.join("playbooks", "restart.yml"))
    assert status.PLAYBOOK.endswith(os.path.join("playbooks", "status.yml"))


def test_restart_command_maps_the_playbook_outcome(monkeypatch):
    monkeypatch.setattr(restart, "PLAYBOOK", PLAYBOOK)
    assert main(["restart", "-i", INVENTORY, "--limit", "local", "-e", "demo_fail=true"]) == 1


def test_status_command_maps_ready_to_0(monkeypatch):
    monkeypatch.setattr(status, "PLAYBOOK", PLAYBOOK)
    assert main(["status", "-i", INVENTORY, "--limit", "local"]) == 0


def test_status_reads_the_detectors_verdict_not_the_check_mode_outcome():
    res = {"outcome": "check_mode", "verdict": "observed", "assessment": {"verdict": "ready", "phase": "ready"}}
    assert playbook_run.find_verdict(res) == "ready"
    assert playbook_run.find_verdict({"verdict": "stalled"}) == "stalled"
    assert playbook_run.find_verdict({"msg": "no verdict here"}) is None


def test_inside_the_project_venv_it_does_not_re_execute_itself(monkeypatch, tmp_path):
    script = tmp_path / "sglang-ops"
    script.write_text("#")
    monkeypatch.setattr(playbook_command, "ansible_runner_available", lambda: False)
    monkeypatch.setattr(playbook_command, "VENV_DIR", os.path.realpath(__import__("sys").prefix))
    monkeypatch.delenv("SGLANG_OPS_REEXEC", raising=False)
    monkeypatch.setattr(os, "execv", lambda exe, argv: pytest.fail("must not re-exec into itself"))
    err = io.StringIO()
    assert playbook_command.ensure_ansible_runner(argv=[str(script), "status"], err=err) == 2


def test_extra_vars_take_json_objects_and_files_like_ansible_playbook(tmp_path):
    f = tmp_path / "vars.yml"
    f.write_text("sglang_restart_poll_s: 2\nsglang_restart_detector:\n  stall_idle_window_s: 40\n")
    got = playbook_run.parse_extravars(['{"a": {"b": 1}}', "@%s" % f, "a=2"])
    assert got == {"a": 2, "sglang_restart_poll_s": 2, "sglang_restart_detector": {"stall_idle_window_s": 40}}
    for bad in ("{not json", "[1, 2]", "@%s" % (tmp_path / "missing.yml")):
        with pytest.raises(ValueError):
            playbook_run.parse_extravars([bad])


def test_report_location_prefers_the_report_over_the_artifacts_folder():
    assert playbook_run.report_location({"report": {"markdown": "r.md"}, "artifacts": "a"}) == "r.md"
    assert playbook_run.report_location({"report": None, "artifacts": "a"}) == "a"
    assert playbook_run.report_location({"msg": "x"}) is None


def test_restart_cold_passes_sglang_restart_cold_to_the_playbook(monkeypatch):
    seen = {}

    def fake_run(args, playbook, need_ready_verdict):
        seen["extravars"] = playbook_run.parse_extravars(args.extra_vars)
        return 0
    monkeypatch.setattr(playbook_command, "run", fake_run)
    assert main(["restart", "-i", INVENTORY, "--cold"]) == 0
    assert seen["extravars"].get("sglang_restart_cold") is True
    assert main(["restart", "-i", INVENTORY]) == 0
    assert "sglang_restart_cold" not in seen["extravars"]
