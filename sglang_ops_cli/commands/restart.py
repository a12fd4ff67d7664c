"""`bin/sglang-ops restart [-i INVENTORY] [--limit HOST] [-e k=v]`: run playbooks/restart.yml
through ansible-runner, streaming the live progress lines; exit 0 when every host came up
ready, 1 when one gave up (its incident report path is in the output), 2 usage, 4 unreachable."""
import os

from sglang_ops_cli import playbook_command
from sglang_ops_cli.playbook_run import ROOT

HELP = "restart the service with live progress (playbooks/restart.yml)"
PLAYBOOK = os.path.join(ROOT, "playbooks", "restart.yml")
add_arguments = playbook_command.add_arguments


def run(args):
    return playbook_command.run(args, PLAYBOOK, need_ready_verdict=False)
