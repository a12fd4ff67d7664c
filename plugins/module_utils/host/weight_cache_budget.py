"""The delivery budget of a later SGLang's weight cache daemon (domain/weight_cache.py: 0.5.23
has none), read as the daemon's own `--status` reports it: its launcher found among the
daemon unit's processes, each GPU's daemon asked with the launcher's python, environment and
user. One reader for both who decide warm or cold: the restart playbook runs the commands
through its remote shell (plugin_utils/restart/weight_cache_step.py), the engine's supervisor
on the host through local_shell (services/engine_cache_start.py).
"""
import shlex
from dataclasses import dataclass

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import weight_cache
from ansible_collections.sglang_ops.serving.plugins.module_utils.host.bounded_run import bounded_run

# Each step's bound: a python that imports SGLang to answer --status.
BUDGET_TIMEOUT_S = 120


@dataclass(frozen=True)
class BudgetReading:
    """What the daemon's --status said: budget (DeliveryBudget, None when unknown); supported
    False when the installed SGLang has no budget (0.5.23), None when it could not be told;
    problem: why it could not be read ('' when it was, or when there is none)."""
    budget: object = None
    supported: object = None
    problem: str = ""

    def to_dict(self):
        out = {"supported": self.supported}
        if self.budget is not None:
            out.update(self.budget.to_dict())
        if self.problem:
            out["problem"] = self.problem
        return out


def cmdlines_cmd(pids):
    """Print each live process's pid and argv (/proc/<pid>/cmdline), one per line, \\x1f between them."""
    return ("for p in %s; do a=$(tr '\\000' '\\037' < /proc/$p/cmdline 2>/dev/null) && printf '%%s\\037%%s\\n' \"$p\" \"$a\"; "
            "done; true") % " ".join(str(int(p)) for p in pids)


def parse_cmdlines(out):
    """{pid: argv} of cmdlines_cmd's output."""
    found = {}
    for line in (out or "").splitlines():
        pid, sep, rest = line.partition("\x1f")
        if sep and pid.isdigit():
            found[int(pid)] = rest.rstrip("\x1f").split("\x1f")
    return found


def status_cmd(launcher_pid, commands):
    """Ask every GPU's daemon for its budget, side by side, as the daemon's user and in its
    environment (its socket template, CUDA_VISIBLE_DEVICES: the launcher's /proc entry); each
    answer in a file of its own until all are done, so that no two lines mix. Run by root (the
    playbook) it changes to the daemon's user; run by that user (the engine's supervisor, the
    same service user) it runs as it is."""
    pid = int(launcher_pid)
    runs = "".join("xargs -0 -a /proc/%d/environ sh -c %s sh >\"$d/%d.out\" 2>\"$d/%d.err\" & " % (
        pid, shlex.quote('exec env -i "$@" ' + " ".join(shlex.quote(a) for a in argv)), n, n)
        for n, argv in enumerate(commands))
    script = shlex.quote('d=$(mktemp -d) || exit 1; %swait; cat "$d"/*.out; cat "$d"/*.err >&2; rm -rf "$d"' % runs)
    return ('u=$(stat -c %%U /proc/%d) && if [ "$(id -un)" = "$u" ]; then sh -c %s; else runuser -u "$u" -- sh -c %s; fi'
            % (pid, script, script))


def read_budget(shell, pids):
    """The delivery budget of the daemons among `pids` (every process of the daemon's unit):
    their launcher found by its argv, each GPU's daemon asked with --status.
    shell(cmd, timeout_s) -> (rc, out, err). Never raises: a BudgetReading says what was found."""
    if not pids:
        return BudgetReading(problem="the weight cache daemon's unit has no process")
    dummy_rc, out, dummy_err = shell(cmdlines_cmd(pids), BUDGET_TIMEOUT_S)
    argvs = sorted(parse_cmdlines(out).items())
    launcher = weight_cache.daemon_launcher([argv for dummy_pid, argv in argvs])
    if launcher is None:
        return BudgetReading(problem="no weight cache daemon process found among %s" % list(pids))
    launcher_pid = [pid for pid, argv in argvs if argv == launcher][0]
    try:
        commands = weight_cache.status_commands(launcher)
    except ValueError as exc:
        return BudgetReading(problem=str(exc))
    rc, out, err = shell(status_cmd(launcher_pid, commands), BUDGET_TIMEOUT_S)
    budget, problem = weight_cache.parse_budget_status(rc, out, err, len(commands))
    if budget is None and not problem:
        return BudgetReading(supported=False)
    return BudgetReading(budget=budget, supported=True if budget is not None else None, problem=problem)


def local_shell(cmd, timeout_s):
    """read_budget's shell on this host: sh -c cmd, bounded (its whole process group killed at
    the bound); (rc, out, err), rc None when it did not finish."""
    res = bounded_run(["sh", "-c", cmd], timeout_s)
    err = res.stderr + ("\n(no answer within %.0f s)" % timeout_s if res.timed_out else "")
    return res.rc, res.stdout, err
