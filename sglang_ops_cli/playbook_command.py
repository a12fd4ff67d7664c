"""What `bin/sglang-ops restart` and `status` share: their arguments, finding
ansible-runner (re-running the command inside the project's .venv when the current
interpreter lacks it), and turning the playbook's outcome into an exit status."""
import argparse
import importlib.util
import os
import sys

from sglang_ops_cli import playbook_run
from sglang_ops_cli.playbook_run import EXIT_USAGE, ROOT

VENV_DIR = os.path.join(ROOT, ".venv")
VENV_PYTHON = os.path.join(VENV_DIR, "bin", "python")
_REEXEC_MARK = "SGLANG_OPS_REEXEC"

EXIT_CODES_EPILOG = """exit status:
  0  every host ready
  1  a host gave up or a task failed (see the printed artifacts path)
  2  usage error, missing inventory, or ansible-runner not installed
  3  (status) reachable, but the service is not ready, or the host is drained
     (or in maintenance) in the load balancer
  4  at least one host unreachable"""


def add_arguments(parser):
    parser.epilog = EXIT_CODES_EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("-i", "--inventory", default=None,
                        help="inventory file or folder (default: $ANSIBLE_INVENTORY; without either the "
                             "command stops: it never picks an inventory for you)")
    parser.add_argument("--limit", metavar="HOST", help="only these hosts (Ansible --limit pattern)")
    parser.add_argument("-e", "--extra-vars", dest="extra_vars", action="append", default=[],
                        metavar="KEY=VALUE|JSON|@FILE",
                        help="extra variables for the playbook, as ansible-playbook -e takes them (repeatable)")


def ansible_runner_available():
    return importlib.util.find_spec("ansible_runner") is not None


def ensure_ansible_runner(argv=None, err=None):
    """Return None when ansible_runner is importable. Otherwise re-exec the command with the
    project's .venv interpreter (never returns), or, when that is impossible, print why and
    return EXIT_USAGE."""
    err = err or sys.stderr
    if ansible_runner_available():
        return None
    argv = list(sys.argv if argv is None else argv)
    # a venv's python is usually a link to the base interpreter: compare prefixes, not binaries
    in_project_venv = os.path.realpath(sys.prefix) == os.path.realpath(VENV_DIR)
    script = argv[0] if argv and os.path.isfile(argv[0]) else None
    if (script and os.access(VENV_PYTHON, os.X_OK) and not in_project_venv
            and not os.environ.get(_REEXEC_MARK)):
        os.environ[_REEXEC_MARK] = "1"
        os.execv(VENV_PYTHON, [VENV_PYTHON, script] + argv[1:])
    err.write("sglang-ops: ansible-runner is not installed for %s.\n"
              "Create the project virtualenv first (make venv, or bin/bootstrap-venv), then run "
              "bin/sglang-ops again; it uses %s when it exists.\n" % (sys.executable, VENV_PYTHON))
    return EXIT_USAGE


def run(args, playbook, need_ready_verdict, out=None, err=None, project_dir=ROOT, after=None):
    """Run `playbook` for the parsed arguments; the exit status (playbook_run.EXIT_*).
    after(outcome, out): what the command prints once the playbook ran."""
    out, err = out or sys.stdout, err or sys.stderr
    try:
        extravars = playbook_run.parse_extravars(args.extra_vars)
    except ValueError as exc:
        err.write("sglang-ops: %s\n" % exc)
        return EXIT_USAGE
    if args.inventory is None and not os.environ.get("ANSIBLE_INVENTORY"):
        err.write("sglang-ops: which inventory? Give it with -i (e.g. -i inventories/production, or "
                  "-i inventories/demo for the demo) or set ANSIBLE_INVENTORY\n")
        return EXIT_USAGE
    if args.inventory is not None and not os.path.exists(args.inventory):
        err.write("sglang-ops: inventory %s does not exist\n" % args.inventory)
        return EXIT_USAGE
    missing = ensure_ansible_runner(err=err)
    if missing is not None:
        return missing
    outcome = playbook_run.run_playbook(playbook, inventory=args.inventory, limit=args.limit,
                                        extravars=extravars, out=out, project_dir=project_dir)
    code = outcome.exit_code(need_ready_verdict=need_ready_verdict)
    for host, where in sorted(outcome.reports.items()):
        out.write("incident report for %s: %s\n" % (host, where))
    if after is not None:
        after(outcome, out)
    err.write("sglang-ops: %s\n" % describe(outcome, code))
    return code


def describe(outcome, code):
    parts = ["exit %d" % code]
    if outcome.unreachable:
        parts.append("unreachable: %s" % ", ".join(outcome.unreachable))
    if outcome.failed:
        parts.append("failed: %s" % ", ".join(outcome.failed))
    if outcome.verdicts:
        parts.append("verdicts: %s" % ", ".join("%s=%s" % hv for hv in sorted(outcome.verdicts.items())))
    if outcome.out_of_lb:
        parts.append("out of the load balancer: %s" % ", ".join(
            "%s %s (%s)" % (host, "drained" if state == "drain" else "in maintenance", where)
            for host, (state, where) in sorted(outcome.out_of_lb.items())))
    if outcome.status == "canceled":
        parts.append("interrupted; ansible-playbook was stopped")
    elif not outcome.unreachable and not outcome.failed and outcome.rc != 0:
        parts.append("ansible-playbook rc %d (%s)" % (outcome.rc, outcome.status))
    return "; ".join(parts)
