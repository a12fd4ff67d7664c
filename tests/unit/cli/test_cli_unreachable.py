"""The real playbooks against a host whose SSH port (31399) is closed: `bin/sglang-ops status`
and `restart` exit 4 (docs/architecture.md#cli), and so does `ansible-playbook restart.yml`,
because the restart action reports the host unreachable, not failed."""
import os
import subprocess
import sys

from sglang_ops_cli.cli import main
from sglang_ops_cli.playbook_run import EXIT_UNREACHABLE, ROOT

INVENTORY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "inventory.ini")


def _extra(tmp_path):
    return ["-e", "sglang_ops_target=gone", "-e", "sglang_restart_artifacts_dir=%s" % tmp_path]


def test_status_of_an_unreachable_host_exits_4_and_names_its_report(tmp_path, capsys):
    assert main(["status", "-i", INVENTORY] + _extra(tmp_path)) == EXIT_UNREACHABLE
    out, err = capsys.readouterr()
    assert "unreachable: gone" in err and "failed:" not in err
    assert "incident report for gone: %s" % tmp_path in out


def test_restart_of_an_unreachable_host_exits_4(tmp_path, capsys):
    assert main(["restart", "-i", INVENTORY] + _extra(tmp_path)) == EXIT_UNREACHABLE
    assert "unreachable: gone" in capsys.readouterr().err


def test_ansible_playbook_restart_yml_exits_4_for_an_unreachable_host(tmp_path):
    ansible_playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    run = subprocess.run([ansible_playbook, "-i", INVENTORY, os.path.join(ROOT, "restart.yml")] + _extra(tmp_path),
                         cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg")))
    assert run.returncode == 4, run.stdout[-2000:] + run.stderr[-2000:]
    assert "unreachable=1" in run.stdout
