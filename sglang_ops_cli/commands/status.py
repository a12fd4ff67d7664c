"""`bin/sglang-ops status [HOST] [-i INVENTORY] [--limit HOST] [-e k=v]`: run the read-only
playbooks/status.yml (one observation and the detector's assessment per host), then name
each host's newest incident report; exit 0 when every host is ready, 3 when a reachable
host is not (or is drained in the load balancer, sglang_lb), 1 on a failed task, 2 usage,
4 unreachable."""
import os
import sys

from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared.artifacts import newest_report, run_artifacts_root
from sglang_ops_cli import playbook_command
from sglang_ops_cli.playbook_run import ROOT

HELP = "show each host's service state, the detector's assessment and its newest incident report"
PLAYBOOK = os.path.join(ROOT, "playbooks", "status.yml")
ARTIFACTS = os.path.join(ROOT, "artifacts")


def add_arguments(parser):
    playbook_command.add_arguments(parser)
    parser.add_argument("host", nargs="?", metavar="HOST", help="one host (the same as --limit HOST)")


def artifacts_root(host, outcome):
    """Where the restart action keeps the host's runs, read from the run folder status.yml
    just wrote; the default artifacts/ else."""
    return run_artifacts_root(host, outcome.artifacts.get(host), ARTIFACTS)


def report_lines(hosts, root=ARTIFACTS):
    """One line per host naming its newest incident report (or that it has none); root: one
    folder for every host, or a function of the host."""
    lines = []
    for host in sorted(hosts):
        root_of_host = root(host) if callable(root) else root
        found = newest_report(root_of_host, host)
        if found is None:
            lines.append("newest report for %s: none under %s" % (host, os.path.relpath(root_of_host)))
        else:
            report, run_dir = found
            lines.append("newest report for %s: %s (run %s)" % (host, os.path.relpath(report), os.path.basename(run_dir)))
    return lines


def run(args, out=None):
    if args.host:
        if args.limit and args.limit != args.host:
            print("sglang-ops status: give HOST or --limit, not both", file=sys.stderr)
            return playbook_command.EXIT_USAGE
        args.limit = args.host

    def after(outcome, stream):
        hosts = set(outcome.verdicts) | set(outcome.failed) | set(outcome.unreachable)
        for line in report_lines(hosts, root=lambda host: artifacts_root(host, outcome)):
            stream.write(line + "\n")

    return playbook_command.run(args, PLAYBOOK, need_ready_verdict=True, out=out, after=after)
