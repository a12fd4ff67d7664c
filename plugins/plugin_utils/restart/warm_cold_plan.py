"""Warm or cold, for a host that runs the weight cache (weight_cache_step.py): whether the
host runs it at all, the daemon's state and delivery budget as the run goes, the plan of
each start and how the attempt records it, and a cold start's restart of the daemon,
followed through its supervisor's records.
"""
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.durations import fmt_duration
from ansible_collections.sglang_ops.serving.plugins.module_utils.host import weight_cache_budget
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import supervised_restart, weight_cache_step
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.restart_run import RemoteStepFailed
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared.artifacts import RunArtifacts

# Why no restart, when the daemon of a cold start did not come up.
DAEMON_FAILED_BECAUSE = "the weight cache daemon did not come up: the engine cannot attach to its weights"


class WarmColdPlan:
    """The weight cache side of a RestartRun: run.daemon (None on a host without the weight
    cache, where every method but read_daemon(first=True) does nothing) and
    run.record["weight_cache"]."""

    def __init__(self, run):
        self.run = run

    def read_daemon(self, first=False):
        """Read the daemon unit beside this one; on the first read, decide whether the host runs
        the weight cache at all (option weight_cache, else the daemon unit installed)."""
        run = self.run
        if not first and run.daemon is None:
            return None
        if first and run.args.get("weight_cache") is False:
            return None
        try:
            view = weight_cache_step.read_daemon(run.access, run.unit)
        except RuntimeError as exc:
            raise RemoteStepFailed("%s: %s" % (run.host, exc))
        if first:
            try:
                used = weight_cache_step.in_use(run.args.get("weight_cache"), view)
            except ValueError as exc:
                raise RemoteStepFailed("%s: %s" % (run.host, exc))
            if not used:
                return None
            run.record["weight_cache"] = {"daemon_unit": view.unit, "daemon_before": view.to_dict(),
                                          "cold_restarts": []}
        run.daemon = view
        return view

    def plan(self, previous=None):
        """The next start's RestartPlan (warm or cold, why), or None without the weight cache."""
        if self.run.daemon is None:
            return None
        self.read_daemon()
        return weight_cache_step.plan(self.run.daemon, bool(self.run.args.get("cold")), previous,
                                      budget=self._read_budget("before").budget,
                                      min_deliveries=weight_cache_step.min_deliveries(self.run.args))

    def _read_budget(self, when):
        """The daemon's delivery budget into run.json's weight_cache (delivery_budget_before or
        _after); not asked again once SGLang said it has none (0.5.23)."""
        run = self.run
        if run.record["weight_cache"].get("delivery_budget_supported") is False or not run.daemon.healthy:
            return weight_cache_budget.BudgetReading()
        reading = weight_cache_step.read_budget(run.access.shell, run.daemon)
        if reading.supported is False:
            run.record["weight_cache"]["delivery_budget_supported"] = False
            return reading
        run.record["weight_cache"]["delivery_budget_" + when] = reading.to_dict()
        if reading.problem:
            run.access.emit("weight cache delivery budget not read: %s" % reading.problem)
        return reading

    def budget_after_ready(self):
        """After a ready start beside the daemon: its budget read, said, and written as a metric
        when metrics_dir is set (weight_cache_step.after_ready)."""
        run = self.run
        if run.daemon is not None:
            self.read_daemon()
            weight_cache_step.after_ready(self._read_budget("after").budget, run.args, run.access.shell,
                                          run.access.emit, run.unit, run.host, run.access.clock)

    def note_plan(self, attempt, planned):
        """The attempt's restart_kind and why. A cold plan makes a cold start whatever the
        engine then did (it attaches to weights the daemon has just loaded from disk); a warm
        plan keeps the supervisor's record when it has one (a start that fell back to a disk
        load is cold_fallback), else the plan's."""
        if planned is None:
            return
        supervisor_kind = attempt.get("restart_kind")
        if planned.cold or not supervisor_kind or supervisor_kind == planned.kind:
            attempt["restart_kind"], attempt["restart_kind_reason"] = planned.kind, planned.reason
        elif not attempt.get("restart_kind_reason"):
            attempt["restart_kind_reason"] = planned.reason
        self.run.record["restart_kind"] = attempt["restart_kind"]
        self.run.record["restart_kind_reason"] = attempt["restart_kind_reason"]

    def restart_daemon(self, planned, before_attempt):
        """Cold: restart the daemon unit (the engine is already stopped: it maps the daemon's
        weights) and follow its start with its supervisor's records. None when it is ready,
        else (phase, reason_code, reason) of the daemon's failed start."""
        run, name = self.run, self.run.daemon.unit
        run.stage = "restarting the weight cache daemon %s (cold, attempt %d)" % (name, before_attempt)
        run.access.emit("cold restart (%s): restarting the weight cache daemon %s; %s starts once its weights "
                        "are on the GPUs" % (planned.reason, name, run.unit))
        folder = "weights-before-attempt-%d" % before_attempt
        watch = supervised_restart.SupervisedRestart(
            name, run.access.for_unit(name), RunArtifacts.at(run.artifacts.abspath(folder)), run.args["poll_s"],
            run.args["start_timeout_s"], starts_dir=weight_cache_step.daemon_starts_dir())
        run.changed = True
        try:
            res = watch.run()
        except (RuntimeError, ValueError) as exc:
            raise RemoteStepFailed("%s: weight cache daemon: %s" % (run.host, exc))
        last = res["last"] or {}
        cold_restart = {
            "before_attempt": before_attempt, "reason": planned.reason, "outcome": res["outcome"], "folder": folder,
            "daemon_starts": [{k: a.get(k) for k in ("n", "verdict", "phase", "reason_code", "reason", "t")}
                              for a in watch.attempts]}
        run.record["weight_cache"]["cold_restarts"].append(cold_restart)
        self.read_daemon()
        cold_restart["main_pid"] = run.daemon.main_pid     # the daemon's after its restart
        if res["outcome"] == "ready":
            run.access.emit("weight cache daemon %s ready after %s (MainPID %s); starting %s" % (
                name, fmt_duration(last.get("ready_after_s") or 0.0), run.daemon.main_pid, run.unit))
            return None
        if res["outcome"] == "timeout":
            return (last.get("phase") or "weight_load", "stall_no_progress",
                    "the weight cache daemon %s was not ready within start_timeout_s=%.0f s; last: %s" % (
                        name, run.args["start_timeout_s"], last.get("progress") or last.get("reason") or "none"))
        return (last.get("phase") or "weight_load", last.get("reason_code") or "process_exited",
                "the weight cache daemon %s did not come up: %s" % (name, last.get("reason") or "no reason recorded"))

    def daemon_words(self):
        d = self.run.daemon
        if d.healthy:
            return "weight cache daemon %s healthy (MainPID %s)" % (d.unit, d.main_pid)
        return "weight cache daemon %s not healthy: %s" % (d.unit, d.why_not_healthy())
