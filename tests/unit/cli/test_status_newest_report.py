"""`bin/sglang-ops status HOST` names the host's newest incident report and its path."""
import os

from sglang_ops_cli import cli
from sglang_ops_cli.commands import status


def _run_folder(root, host, stamp, report=True):
    path = root / host / stamp
    path.mkdir(parents=True)
    (path / "run.json").write_text("{}")
    if report:
        (path / "report.md").write_text("# report\n")
    return path


def test_the_newest_run_with_a_report_is_named_per_host(tmp_path):
    _run_folder(tmp_path, "gpu-1", "20261130T010000Z")
    newest = _run_folder(tmp_path, "gpu-1", "20261130T020000Z")
    _run_folder(tmp_path, "gpu-1", "20261130T030000Z", report=False)   # a ready run: no report
    lines = status.report_lines(["gpu-1", "gpu-2"], root=str(tmp_path))
    assert lines[0].startswith("newest report for gpu-1: ")
    assert os.path.relpath(str(newest / "report.md")) in lines[0] and "20261130T020000Z" in lines[0]
    assert lines[1].startswith("newest report for gpu-2: none")


def test_a_host_given_as_argument_limits_the_run_to_it():
    args = cli.build_parser().parse_args(["status", "-i", "inventories/production", "gpu-k26-01"])
    assert args.host == "gpu-k26-01" and args.inventory == "inventories/production"
