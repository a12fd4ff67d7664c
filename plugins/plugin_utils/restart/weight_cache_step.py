"""Warm or cold, per attempt of a restart, on a host whose engine unit runs beside SGLang's
weight cache daemon unit (<unit>-weights.service, roles/sglang_service
sglang_service_weight_cache).

Warm: the engine unit alone is restarted and re-attaches to the weights the daemon holds
on the GPUs; the daemon unit is untouched and its processes are expected GPU holders.
Cold: the engine is stopped, the daemon unit restarted and its start followed like the
engine's (its supervisor says ready once every GPU's ready file names a live daemon), then
the engine is started. domain/warm_cold.decide says when a start must be cold (the unit's
supervisor asks it too); this module reads the daemon as the restart sees it and turns that
into a plan.

The daemon's health is its supervisor's verdict: the unit is active and running and its
newest start record is ready (after ready, the supervisor checks every GPU's ready file
and pid each poll and ends the start when one is gone).
"""
import os
from dataclasses import dataclass, field

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import warm_cold, weight_cache
from ansible_collections.sglang_ops.serving.plugins.module_utils.host import weight_cache_budget
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


def plan(daemon, cold_requested, previous=None, budget=None, min_deliveries=0):
    """The RestartPlan of the next start (domain/warm_cold.decide, the supervisor's decision
    too). daemon: DaemonView; cold_requested: the option cold; previous: the record of this
    run's previous attempt (run.json's), or None before the first; budget: the daemon's
    DeliveryBudget read just before (None: none known), cold below min_deliveries left. A
    daemon found unhealthy is named with why."""
    planned = warm_cold.decide(previous, daemon.healthy, budget=budget, min_deliveries=min_deliveries,
                               cold_requested=cold_requested)
    if planned.reason == weight_cache.REASON_DAEMON_NOT_HEALTHY and daemon.why_not_healthy():
        return warm_cold.RestartPlan(planned.kind, "%s: %s" % (planned.reason, daemon.why_not_healthy()))
    return planned


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
def read_budget(shell, daemon):
    """The delivery budget of the daemons of `daemon` (DaemonView), read through the restart's
    shell(cmd, timeout_s) as host/weight_cache_budget reads it. Never raises."""
    if not daemon.healthy or not daemon.pids:
        return weight_cache_budget.BudgetReading(problem="the weight cache daemon is not healthy")
    return weight_cache_budget.read_budget(shell, daemon.pids)


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
