"""`bin/sglang-ops status [-i INVENTORY] [--limit HOST] [-e k=v]`: run the read-only
playbooks/status.yml (one observation and the detector's assessment per host); exit 0
when every host is ready, 3 when a reachable host is not, 1 on a failed task, 2 usage,
4 unreachable."""
import os

from sglang_ops_cli import playbook_command
from sglang_ops_cli.playbook_run import ROOT

HELP = "show each host's service state and the detector's assessment (playbooks/status.yml)"
PLAYBOOK = os.path.join(ROOT, "playbooks", "status.yml")
add_arguments = playbook_command.add_arguments


def run(args):
    return playbook_command.run(args, PLAYBOOK, need_ready_verdict=True)
