"""`bin/sglang-ops restart [-i INVENTORY] [--limit HOST] [-e k=v]`: run playbooks/restart.yml
through ansible-runner, streaming the live progress lines; exit 0 when every host came up
ready, 1 when one gave up (its incident report path is in the output), 2 usage, 4 unreachable.
--break-lock takes over a host's restart lock left by a run known to be dead; --cold makes
the first start cold on a host with the weight cache (the daemon unit restarted too)."""
import os

from sglang_ops_cli import playbook_command
from sglang_ops_cli.playbook_run import ROOT

HELP = "restart the service with live progress (playbooks/restart.yml)"
PLAYBOOK = os.path.join(ROOT, "playbooks", "restart.yml")


def add_arguments(parser):
    playbook_command.add_arguments(parser)
    parser.add_argument("--break-lock", action="store_true",
                        help="take over the host's restart lock even if its holder may still run "
                             "(only for a run known to be dead: two live restarts stop each other's start)")
    parser.add_argument("--cold", action="store_true",
                        help="restart the weight cache daemon too, so the weights come from disk again "
                             "(default: warm while the daemon is healthy; docs/restart-speed.md)")


def run(args):
    if getattr(args, "break_lock", False):
        args.extra_vars = list(args.extra_vars) + ['{"sglang_restart_break_lock": true}']
    if getattr(args, "cold", False):
        args.extra_vars = list(args.extra_vars) + ['{"sglang_restart_cold": true}']
    return playbook_command.run(args, PLAYBOOK, need_ready_verdict=False)
