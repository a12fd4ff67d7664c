"""Warm or cold, per attempt of a restart, on a host whose engine unit runs beside SGLang's
weight cache daemon unit (<unit>-weights.service, roles/sglang_service
sglang_service_weight_cache).

Warm: the engine unit alone is restarted and re-attaches to the weights the daemon holds
on the GPUs; the daemon unit is untouched and its processes are expected GPU holders.
Cold: the engine is stopped, the daemon unit restarted and its start followed like the
engine's (its supervisor says ready once every GPU's ready file names a live daemon), then
the engine is started. domain/weight_cache.cold_reason says when a restart must be cold;
this module reads the daemon as the restart sees it and turns that into a plan.

The daemon's health is its supervisor's verdict: the unit is active and running and its
newest start record is ready (after ready, the supervisor checks every GPU's ready file
and pid each poll and ends the start when one is gone).
"""
import os
import shlex
from dataclasses import dataclass, field

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import weight_cache
from ansible_collections.sglang_ops.serving.plugins.module_utils.records import start_metrics, start_records
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import metrics_step


def daemon_unit(unit):
    """The daemon's unit beside the engine unit `unit`, as systemctl names it without its
    type (the role's _sglang_service_weights_unit)."""
    return weight_cache.daemon_unit(unit)[:-len(".service")]


def daemon_starts_dir(engine_starts_dir=start_records.DEFAULT_ROOT):
    """Where the daemon's supervisor records its starts (the role's
    _sglang_service_weights_starts_state_directory)."""
    return engine_starts_dir.rstrip("/") + weight_cache.DAEMON_UNIT_SUFFIX


@dataclass(frozen=True)
class DaemonView:
    """The daemon unit as the restart sees it: from one probe read."""
    unit: str
    installed: bool
    active: str = ""
    sub: str = ""
    main_pid: object = None            # int or None
    pids: tuple = ()                   # every process in the daemon unit's cgroup: expected GPU holders
    last_start: dict = field(default_factory=dict)   # its supervisor's newest start record, {} if none

    @property
    def healthy(self):
        return (self.installed and self.active == "active" and self.sub == "running"
                and self.last_start.get("verdict") == "ready")

    def why_not_healthy(self):
        """Words for the operator ('' when healthy)."""
        if self.healthy:
            return ""
        if not self.installed:
            return "%s is not installed" % self.unit
        if (self.active, self.sub) != ("active", "running"):
            return "%s is %s/%s" % (self.unit, self.active, self.sub)
        start = self.last_start
        if not start:
            return "%s has no start recorded by its supervisor" % self.unit
        why = start.get("reason_code") or start.get("phase") or "?"
        return "the newest start of %s is %s (%s)" % (self.unit, start.get("verdict"), why)

    def to_dict(self):
        return {"unit": self.unit, "installed": self.installed, "active": self.active, "sub": self.sub,
                "main_pid": self.main_pid, "healthy": self.healthy, "why_not_healthy": self.why_not_healthy(),
                "last_start": os.path.basename(self.last_start.get("dir") or "") or None}


def read_daemon(access, unit, starts_dir=None):
    """DaemonView of the daemon beside engine unit `unit`, in one probe read (access.read);
    RuntimeError when the probe cannot answer."""
    name = daemon_unit(unit)
    res = access.read(unit=name, unit_state=True, unit_processes=True, starts=1,
                      starts_dir=starts_dir or daemon_starts_dir())
    if res.get("failed") or "unit_state" not in res:
        why = res.get("msg") or (res.get("missing") or {}).get("unit_state") or "no answer"
        raise RuntimeError("reading the weight cache daemon %s failed: %s" % (name, why))
    state = res["unit_state"]
    starts = (res.get("starts") or {}).get("starts") or []
    return DaemonView(unit=name, installed=bool(state.get("installed")), active=state.get("active") or "",
                      sub=state.get("sub") or "", main_pid=state.get("main_pid"),
                      pids=tuple(int(p["pid"]) for p in res.get("unit_processes") or ()),
                      last_start=dict(starts[0]) if starts else {})


@dataclass(frozen=True)
class RestartPlan:
    kind: str       # weight_cache.RESTART_WARM or RESTART_COLD
    reason: str     # weight_cache.REASON_DAEMON_HEALTHY for a warm one, else why it is cold

    @property
    def cold(self):
        return self.kind == weight_cache.RESTART_COLD

    def words(self):
        if self.cold:
            return "cold (%s): the weight cache daemon is restarted too, the weights come from disk" % self.reason
        return "warm: the engine alone, the weight cache daemon keeps the weights on the GPUs"


def plan(daemon, cold_requested, previous=None, budget=None, min_deliveries=0):
    """The RestartPlan of the next start. daemon: DaemonView; cold_requested: the option
    cold, which makes the run's first start cold (later ones follow the rules: a cold start
    that stalled after its weights is followed by a warm one, the daemon keeping the weights
    it has just loaded); previous: the record of this run's previous attempt (run.json's),
    or None before the first; budget: the daemon's DeliveryBudget read just before (None:
    none known), cold below min_deliveries left (domain/weight_cache.budget_reason)."""
    if cold_requested and not previous:
        return RestartPlan(weight_cache.RESTART_COLD, weight_cache.REASON_REQUESTED)
    previous = previous or {}
    failed = bool(previous) and previous.get("verdict") != "ready"
    kind = previous.get("restart_kind")
    if failed and budget is None and previous.get("restart_kind_reason") == weight_cache.REASON_BUDGET_EXHAUSTED:
        # the engine was answered budget_exhausted and the daemon's --status could not be read
        return RestartPlan(weight_cache.RESTART_COLD, weight_cache.REASON_BUDGET_EXHAUSTED)
    reason = weight_cache.cold_reason(
        previous.get("reason_code") if failed else None, daemon.healthy,
        failed and kind == weight_cache.RESTART_WARM, kind == weight_cache.RESTART_COLD_FALLBACK,
        budget=budget, min_deliveries=min_deliveries)
    if reason == weight_cache.REASON_DAEMON_NOT_HEALTHY and daemon.why_not_healthy():
        reason = "%s: %s" % (reason, daemon.why_not_healthy())
    if reason:
        return RestartPlan(weight_cache.RESTART_COLD, reason)
    return RestartPlan(weight_cache.RESTART_WARM, weight_cache.REASON_DAEMON_HEALTHY)


def in_use(option, daemon):
    """Whether the host runs the weight cache: the option weight_cache (the role's
    sglang_service_weight_cache) when set, else whether the daemon unit is installed.
    ValueError when the option says so and the unit is missing."""
    if option is None:
        return daemon.installed
    if option and not daemon.installed:
        raise ValueError("weight_cache is true but %s is not installed on the host (run playbooks/site.yml "
                         "with sglang_service_weight_cache: true)" % daemon.unit)
    return bool(option)


# ---- the delivery budget of a later SGLang's daemon ------------------------------------------
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
    answer in a file of its own until all are done, so that no two lines mix."""
    pid = int(launcher_pid)
    runs = "".join("xargs -0 -a /proc/%d/environ sh -c %s sh >\"$d/%d.out\" 2>\"$d/%d.err\" & " % (
        pid, shlex.quote('exec env -i "$@" ' + " ".join(shlex.quote(a) for a in argv)), n, n)
        for n, argv in enumerate(commands))
    script = 'd=$(mktemp -d) || exit 1; %swait; cat "$d"/*.out; cat "$d"/*.err >&2; rm -rf "$d"' % runs
    return 'u=$(stat -c %%U /proc/%d) && runuser -u "$u" -- sh -c %s' % (pid, shlex.quote(script))


def read_budget(shell, daemon):
    """The delivery budget of the daemons of `daemon` (DaemonView): their launcher found among the
    unit's processes, each GPU's daemon asked with --status. shell(cmd, timeout_s) -> (rc, out, err).
    Never raises: a BudgetReading says what was found."""
    if not daemon.healthy or not daemon.pids:
        return BudgetReading(problem="the weight cache daemon is not healthy")
    dummy_rc, out, dummy_err = shell(cmdlines_cmd(daemon.pids), BUDGET_TIMEOUT_S)
    argvs = sorted(parse_cmdlines(out).items())
    launcher = weight_cache.daemon_launcher([argv for dummy_pid, argv in argvs])
    if launcher is None:
        return BudgetReading(problem="no weight cache daemon process found among %s" % list(daemon.pids))
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


def min_deliveries(args):
    """The restart's weight_cache_min_deliveries option (its default where unset)."""
    value = args.get("weight_cache_min_deliveries")
    return weight_cache.DEFAULT_MIN_DELIVERIES if value is None else int(value)


def after_ready(budget, args, shell, emit, unit, host, clock):
    """After a ready start: the budget said in the progress line (and that the next restart is
    cold when it is low) and written as sglang_weight_cache_deliveries_remaining into the
    metrics folder (args' metrics_dir, when set). Nothing without a budget."""
    if budget is None:
        return
    low = weight_cache.budget_reason(budget, min_deliveries(args))
    emit("weight cache delivery budget: %s%s" % (budget.words(), "; the next restart is cold (%s)" % low if low else ""))
    if not args.get("metrics_dir"):
        return
    text = start_metrics.render_delivery_budget(unit, budget, host=host, clock=clock)
    rc, out, err = shell(metrics_step.write_cmd(args["metrics_dir"], start_metrics.budget_file_name(unit), text),
                         metrics_step.WRITE_TIMEOUT_S)
    if rc != 0:
        emit("writing the delivery budget metric failed (rc %s): %s" % (rc, (err or out or "").strip()[-200:]))
