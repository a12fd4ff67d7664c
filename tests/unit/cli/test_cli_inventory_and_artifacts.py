"""`bin/sglang-ops restart|status` pick no inventory for the operator, and `status` looks for
the newest incident report where the restart action really keeps the host's runs."""
import io

from sglang_ops_cli import cli, playbook_run
from sglang_ops_cli.commands import status


def test_without_an_inventory_the_command_stops_and_says_how_to_give_one(monkeypatch, capsys):
    monkeypatch.delenv("ANSIBLE_INVENTORY", raising=False)
    assert cli.build_parser().parse_args(["status"]).inventory is None
    assert cli.main(["status"]) == playbook_run.EXIT_USAGE
    assert cli.main(["restart"]) == playbook_run.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("which inventory? Give it with -i") == 2 and "ANSIBLE_INVENTORY" in err


def test_the_run_folder_of_the_status_task_is_recorded_per_host():
    printer = playbook_run.EventPrinter(io.StringIO())
    printer({"event": "runner_on_ok", "event_data": {"host": "gpu-1", "res": {
        "artifacts": "/srv/ops-artifacts/gpu-1/20261204T210000Z", "assessment": {"verdict": "ready"}}}})
    assert printer.artifacts == {"gpu-1": "/srv/ops-artifacts/gpu-1/20261204T210000Z"}


def test_status_names_the_newest_report_under_the_artifacts_dir_the_playbook_used(tmp_path):
    custom = tmp_path / "ops-artifacts"
    old = custom / "gpu-1" / "20261204T200000Z"
    old.mkdir(parents=True)
    (old / "run.json").write_text("{}")
    (old / "report.md").write_text("# report\n")
    now = custom / "gpu-1" / "20261204T210000Z"      # the status run itself: no report
    now.mkdir()
    outcome = playbook_run.PlaybookOutcome(rc=0, status="successful", artifacts={"gpu-1": str(now)})
    assert status.artifacts_root("gpu-1", outcome) == str(custom)
    assert status.artifacts_root("gpu-2", outcome) == status.ARTIFACTS
    [line] = status.report_lines(["gpu-1"], root=lambda host: status.artifacts_root(host, outcome))
    assert line.startswith("newest report for gpu-1: ") and "20261204T200000Z" in line, line
