"""The restart procedure of one host, as an operator would follow it: preflight, stop,
confirm the unit's processes are gone and the GPUs released, start, watch, and on a
failure capture diagnostics and either restart (retry_policy) or hand over.

Everything that touches the host goes through one host access (remote_host_access.py), so
the procedure runs in unit tests against a scripted host; the action plugin plugs in
Ansible. All state is per instance: one instance per host and task, nothing module-global.
"""
import dataclasses
import os
import random
import signal

from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import retry_policy
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector import Detector
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.durations import fmt_duration
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import DetectorSettings, from_overrides
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.failure_classes import FAILURE_CLASSES
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.progress_line import progress_line
from ansible_collections.sglang_ops.serving.plugins.module_utils.host import systemd_unit
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.start_watch import TraceTarget, WatchOptions, watch_start
from ansible_collections.sglang_ops.serving.plugins.module_utils.services import observe_only as observe_only_words
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import observe_only_step
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared import host_checks, systemctl_verbs
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import (
    host_lock, metrics_step, server_sync, supervised_restart, weight_cache_step)
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared.artifacts import RunArtifacts, iso_utc, redact_secrets
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import (
    TraceFormatError, code_version, header_settings, read_trace, relative_observation)

RELEASE_POLL_S = 2.0
SETTLE_NUDGE_S = 10.0


class RemoteStepFailed(Exception):
    """A command the procedure depends on (systemctl start, ...) failed on the host."""


class _ColdRestartFailed(Exception):
    """A cold restart's stop or daemon start failed during a supervised run: args are the
    hand-over's (phase, code, reason, because)."""


class RunInterrupted(BaseException):
    """SIGINT or SIGTERM reached the controller during a run (raised by interruptible())."""

    def __init__(self, signame):
        super().__init__(signame)
        self.signame = signame


def interruptible(fn, signals=(signal.SIGINT, signal.SIGTERM)):
    """Run fn() with SIGINT/SIGTERM turned into RunInterrupted, so the procedure can record
    the interruption (run.json) and release the host lock instead of the process dying
    in the middle of a step. Further signals are ignored while it does that; the previous
    handlers come back afterwards."""
    previous = {}

    def on_signal(signum, frame):
        del frame
        for sig in previous:
            signal.signal(sig, signal.SIG_IGN)
        raise RunInterrupted(signal.Signals(signum).name)

    for sig in signals:
        previous[sig] = signal.signal(sig, on_signal)
    try:
        return fn()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@dataclasses.dataclass(frozen=True)
class RestartOptions:
    """What one restart run is told: the task's validated options
    (plugins/modules/sglang_restart.py), the detector settings in force, and the wait
    between attempts."""
    args: dict
    settings: DetectorSettings
    backoff: object                    # retry_policy.Backoff
    rng: object = random.random        # jitter source of the backoff
    new_detector: object = Detector    # new_detector(settings) -> a detector
    defaults: dict = dataclasses.field(default_factory=dict)   # each option's default (the module's spec)

    def changed_from_default(self, names):
        """The options among names that the task sets to something other than their default."""
        return [n for n in names if n in self.defaults and self.args.get(n) != self.defaults[n]]

    def watch(self, trace=None, outlook=None, decided_elsewhere=None, observe_only=None):
        return WatchOptions(poll_s=self.args["poll_s"], start_timeout_s=self.args["start_timeout_s"],
                            settings=self.settings, trace=trace, outlook=outlook,
                            decided_elsewhere=decided_elsewhere, observe_only=observe_only)


# Options of the playbook's own watch that a supervised unit cannot honour: its supervisor
# decides every start and systemd restarts it. Each names the sglang_service role variable
# that sets the same thing for the supervised unit.
SUPERVISOR_DECIDES = {
    "detector": "sglang_service_supervisor_detector",
    "max_attempts": "sglang_service_start_limit_burst",
    "backoff_base_s": "sglang_service_restart_sec",
    "backoff_max_s": "sglang_service_restart_sec",
    "stop_timeout_s": "sglang_service_timeout_stop_s",
    "failed_stop_timeout_s": "sglang_service_timeout_stop_s",
    "release_timeout_s": None,
    "gpu_idle_mib": None,
}


def supervised_option_problem(options):
    """Words refusing the options a supervised unit would silently ignore, or None."""
    ignored = options.changed_from_default(SUPERVISOR_DECIDES)
    if not ignored:
        return None
    return ("option(s) %s would have no effect: the unit runs under its supervisor, which decides every start "
            "(systemd restarts it). Set the supervisor's own instead (%s), or leave them unset for this unit" % (
                ", ".join(ignored),
                "; ".join("%s: %s" % (n, SUPERVISOR_DECIDES[n] or "not applicable") for n in ignored)))


def _time_to_ready_words(ttr):
    """'time to ready 4m10s (usual 10m40s); slower than usual: post_load 9m00s (usual 4m00s); '."""
    if not ttr or ttr.get("ready_after_s") is None:
        return ""
    words = "time to ready %s" % fmt_duration(ttr["ready_after_s"])
    if ttr.get("history_starts"):
        words += " (usual %s)" % fmt_duration(ttr["usual_total_s"])
    slow = ["%s %s (usual %s)" % (s["phase"], fmt_duration(s["took_s"]), fmt_duration(s["usual_s"]))
            for s in ttr.get("slower_than_usual") or ()]
    if slow:
        words += "; slower than usual: " + ", ".join(slow)
    return words + "; "


def _count(n, word):
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


class RestartProcedure:
    def __init__(self, host, options, access, artifacts, prewarm=None, lock=None, server=None):
        self.host = host
        self.options = options
        self.args = args = options.args
        self.unit = args["unit"]
        self.access = access
        self.artifacts = artifacts
        self.prewarm = prewarm  # prewarm(options, step_s, max_total_s) -> summary (issue: shorter restarts)
        self.lock = lock  # host_lock.HostLock, or None where no other run can interfere (tests)
        self.server = server  # server_sync.ServerSync when the host is one node of a server, else None
        self.outlook = None  # module_utils/services/start_outlook.StartOutlook: ETA and metrics, per run
        self.changed = False
        self.venv = None
        self.stage = "preflight"      # what the procedure is doing, for an interruption's record
        self.current_attempt = None   # the attempt being watched, until it is recorded
        self.daemon = None            # weight_cache_step.DaemonView when the host runs the weight cache
        self.cold_restarts = 0        # cold restarts this run did after a failed start (at most one)
        self._plans = [(1, None)]     # (first supervised start, RestartPlan) in force from it on
        self.record = {
            "host": host, "unit": self.unit, "started": iso_utc(access.clock()), "finished": None,
            "outcome": None, "gave_up_because": None, "attempts": [], "preflight": {},
            "settings": options.settings.to_dict(), "code": code_version(),
            "options": {k: args[k] for k in ("poll_s", "max_attempts", "start_timeout_s",
                                             "stop_timeout_s", "kill_orphans")},
        }
        if server is not None:
            self.record["server"] = {"name": server.server, "nodes": server.nodes, "node_rank": server.rank,
                                     "folder": server.folder}

    # ---- remote steps -------------------------------------------------------------
    def _sh(self, cmd, what, timeout_s=None, check=True):
        rc, out, err = self.access.shell(cmd, timeout_s)
        if check and rc != 0:
            detail = (err or out or "").strip()[-400:]
            raise RemoteStepFailed("%s failed on %s (rc %s): %s" % (what, self.host, rc, redact_secrets(detail)))
        return rc, out, err

    def _read(self, what, result_key, **asked):
        """One of the probe's reads of the host (access.read); RemoteStepFailed when it cannot answer."""
        result = self.access.read(**asked)
        if result.get("failed") or result_key not in result:
            why = result.get("msg") if result.get("failed") else (result.get("missing") or {}).get(result_key)
            raise RemoteStepFailed("%s failed on %s: %s" % (what, self.host, redact_secrets(str(why or "no answer"))))
        return result

    def _unit_state(self):
        return self._read("reading the unit's state", "unit_state", unit_state=True)["unit_state"]

    def _preflight_read(self):
        """(unit state, classified GPU holders) in one read; the venv noted for what follows."""
        result = self._read("reading the unit's state and GPU holders", "unit_state", unit_state=True,
                            holders=True, gpu_timeout_s=host_checks.NVIDIA_SMI_TIMEOUT_S)
        state = result["unit_state"]
        self._use_venv(state)
        if state["installed"]:
            self._read_daemon(first=True)
        return state, self._classified(result["gpu_holders"])

    def _gpu_check(self):
        result = self._read("GPU holder listing", "gpu_holders", holders=True,
                            gpu_timeout_s=host_checks.NVIDIA_SMI_TIMEOUT_S)
        if self.daemon is not None:
            self._read_daemon()   # its processes now: a cold restart replaces them
        return self._classified(result["gpu_holders"])

    def _classified(self, gpu_holders):
        """The GPU holders, the weight cache daemon's processes expected beside the unit's."""
        return host_checks.classify_holders(host_checks.gpu_check(gpu_holders), self.venv,
                                            expected_pids=self.daemon.pids if self.daemon is not None else ())

    # ---- the weight cache daemon (weight_cache_step) -------------------------------------
    def _read_daemon(self, first=False):
        """Read the daemon unit beside this one; on the first read, decide whether the host runs
        the weight cache at all (option weight_cache, else the daemon unit installed)."""
        if not first and self.daemon is None:
            return None
        if first and self.args.get("weight_cache") is False:
            return None
        try:
            view = weight_cache_step.read_daemon(self.access, self.unit)
        except RuntimeError as exc:
            raise RemoteStepFailed("%s: %s" % (self.host, exc))
        if first:
            try:
                used = weight_cache_step.in_use(self.args.get("weight_cache"), view)
            except ValueError as exc:
                raise RemoteStepFailed("%s: %s" % (self.host, exc))
            if not used:
                return None
            self.record["weight_cache"] = {"daemon_unit": view.unit, "daemon_before": view.to_dict(),
                                           "cold_restarts": []}
        self.daemon = view
        return view

    def _plan(self, previous=None):
        """The next start's RestartPlan (warm or cold, why), or None without the weight cache."""
        if self.daemon is None:
            return None
        self._read_daemon()
        return weight_cache_step.plan(self.daemon, bool(self.args.get("cold")), previous,
                                      budget=self._read_budget("before").budget,
                                      min_deliveries=weight_cache_step.min_deliveries(self.args))

    def _read_budget(self, when):
        """The daemon's delivery budget into run.json's weight_cache (delivery_budget_before or
        _after); not asked again once SGLang said it has none (0.5.23)."""
        if self.record["weight_cache"].get("delivery_budget_supported") is False or not self.daemon.healthy:
            return weight_cache_step.BudgetReading()
        reading = weight_cache_step.read_budget(self.access.shell, self.daemon)
        if reading.supported is False:
            self.record["weight_cache"]["delivery_budget_supported"] = False
            return reading
        self.record["weight_cache"]["delivery_budget_" + when] = reading.to_dict()
        if reading.problem:
            self.access.emit("weight cache delivery budget not read: %s" % reading.problem)
        return reading

    def _budget_after_ready(self):
        """After a ready start beside the daemon: its budget read, said, and written as a metric
        when metrics_dir is set (weight_cache_step.after_ready)."""
        if self.daemon is not None:
            self._read_daemon()
            weight_cache_step.after_ready(self._read_budget("after").budget, self.args, self.access.shell,
                                          self.access.emit, self.unit, self.host, self.access.clock)

    def _note_plan(self, attempt, planned):
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
        self.record["restart_kind"] = attempt["restart_kind"]
        self.record["restart_kind_reason"] = attempt["restart_kind_reason"]

    def _restart_daemon(self, planned, before_attempt):
        """Cold: restart the daemon unit (the engine is already stopped: it maps the daemon's
        weights) and follow its start with its supervisor's records. None when it is ready,
        else (phase, reason_code, reason) of the daemon's failed start."""
        name = self.daemon.unit
        self.stage = "restarting the weight cache daemon %s (cold, attempt %d)" % (name, before_attempt)
        self.access.emit("cold restart (%s): restarting the weight cache daemon %s; %s starts once its weights "
                       "are on the GPUs" % (planned.reason, name, self.unit))
        folder = "weights-before-attempt-%d" % before_attempt
        watch = supervised_restart.SupervisedRestart(
            name, self.access.for_unit(name), RunArtifacts.at(self.artifacts.abspath(folder)), self.args["poll_s"],
            self.args["start_timeout_s"], starts_dir=weight_cache_step.daemon_starts_dir())
        self.changed = True
        try:
            res = watch.run()
        except (RuntimeError, ValueError) as exc:
            raise RemoteStepFailed("%s: weight cache daemon: %s" % (self.host, exc))
        last = res["last"] or {}
        cold_restart = {
            "before_attempt": before_attempt, "reason": planned.reason, "outcome": res["outcome"], "folder": folder,
            "daemon_starts": [{k: a.get(k) for k in ("n", "verdict", "phase", "reason_code", "reason", "t")}
                              for a in watch.attempts]}
        self.record["weight_cache"]["cold_restarts"].append(cold_restart)
        self._read_daemon()
        cold_restart["main_pid"] = self.daemon.main_pid     # the daemon's after its restart
        if res["outcome"] == "ready":
            self.access.emit("weight cache daemon %s ready after %s (MainPID %s); starting %s" % (
                name, fmt_duration(last.get("ready_after_s") or 0.0), self.daemon.main_pid, self.unit))
            return None
        if res["outcome"] == "timeout":
            return (last.get("phase") or "weight_load", "stall_no_progress",
                    "the weight cache daemon %s was not ready within start_timeout_s=%.0f s; last: %s" % (
                        name, self.args["start_timeout_s"], last.get("progress") or last.get("reason") or "none"))
        return (last.get("phase") or "weight_load", last.get("reason_code") or "process_exited",
                "the weight cache daemon %s did not come up: %s" % (name, last.get("reason") or "no reason recorded"))

    def _daemon_words(self):
        d = self.daemon
        if d.healthy:
            return "weight cache daemon %s healthy (MainPID %s)" % (d.unit, d.main_pid)
        return "weight cache daemon %s not healthy: %s" % (d.unit, d.why_not_healthy())

    def _use_venv(self, state):
        """The unit's venv (off ExecStart): where its py-spy is, and what counts as ours."""
        self.venv = state.get("venv")
        if self.venv:
            self.access = self.access.with_probe_args(venv_bin=self.venv.rstrip("/") + "/bin")

    # ---- check mode / status --------------------------------------------------------
    def observe_once(self, supervised_settings=None):
        """One observation and the detector's reading of it, and what a restart would do (the
        preflight decisions of a real run); changes nothing on the host. supervised_settings:
        the DetectorSettings of the unit's supervisor, used when the unit runs under it."""
        state, check = self._preflight_read()
        if not state["installed"]:
            return self._finish("check_mode", "preflight", "unit_missing",
                                "unit %s is not installed on %s" % (self.unit, self.host), failed=True)
        self._note_preflight(check)
        t0 = self.access.clock()
        result = self.access.probe(since_epoch_s=None)
        if result.get("failed") or "observation" not in result:
            raise RemoteStepFailed("probe failed on %s: %s" % (self.host, result.get("msg", "no observation")))
        obs = relative_observation(result["observation"], t0)
        supervised = systemd_unit.is_supervised(state["exec_start"])
        # On a supervised unit its supervisor's settings decide every start: assess with those.
        settings = supervised_settings if supervised and supervised_settings is not None else self.options.settings
        a = self.options.new_detector(settings).observe(obs)
        self.access.emit(progress_line(a))
        if supervised and self.server is None:
            would = ("would restart %s once and follow its supervisor, which decides every start (systemd "
                     "restarts it while a restart can help)" % self.unit)
        else:
            would = ("would stop %s, confirm its processes are gone and the GPUs released, start it and watch "
                     "every %.0f s (up to %d attempts)" % (self.unit, self.args["poll_s"], self.args["max_attempts"]))
        # The same preflight decisions a real run makes, in its order (the lock is taken first).
        refusal = self._preflight_refusal(state, check)
        held_by = self._lock_holder()
        if refusal and refusal[0] == "unit_held":
            would = "would refuse: " + refusal[1]
        elif held_by:
            would = "would refuse: another restart holds the host: " + held_by
        elif refusal:
            would = "would refuse: " + refusal[1]
        self.record["settings"] = settings.to_dict()
        if settings is not self.options.settings:
            self.record["settings_from"] = "the unit's supervisor (supervisor_detector)"
        res = self._finish("check_mode", a.phase, a.reason_code, a.reason)
        res["settings"] = self.record["settings"]
        res.update({"changed": True, "would": would, "assessment": a.to_dict(),
                    "unit_state": obs.get("unit"), "missing": result.get("missing", {}),
                    "msg": "%s: %s; %s" % (self.host, a.reason, would)})
        res["verdict"] = a.verdict
        if self.daemon is not None:
            planned = self._plan()
            res["weight_cache"] = dict(self.daemon.to_dict(), next_restart=planned.kind,
                                       next_restart_reason=planned.reason)
            res["weight_cache_summary"] = "%s; the next restart would be %s" % (self._daemon_words(), planned.words())
            if not held_by and not refusal:
                res["would"] = would + "; " + planned.words()
        if systemd_unit.is_supervised(state["exec_start"]):
            res["supervised"] = True
            res["recent_starts"] = self._recent_starts()
            res["recent_starts_summary"] = [supervised_restart.start_summary(r) for r in res["recent_starts"]]
        return res

    def _preflight_refusal(self, state, check):
        """What makes a restart refuse the host before anything changes, as (reason_code,
        reason, because), or None: the decisions of a real run (_restart) and of check mode."""
        supervised = systemd_unit.is_supervised(state["exec_start"])
        if state.get("held"):
            return ("unit_held", self._held_words(state), "on-call holds the unit: nothing was stopped or started")
        foreign = check.of_kind("foreign")
        if foreign:
            return ("gpu_busy_foreign", "GPUs held by processes outside %s: %s" % (
                self.unit, "; ".join(h.describe() for h in foreign)), None)
        if self.server is None and supervised:
            refused = supervised_option_problem(self.options)
            if refused:
                return ("option_not_applicable", refused,
                        "nothing was changed: an option that would silently do nothing is refused")
        orphans = check.of_kind("orphan")
        if orphans and not self.args["kill_orphans"]:
            return ("orphan_processes", "leftover server processes outside %s hold GPU memory: %s "
                    "(set kill_orphans: true to kill them)" % (self.unit, "; ".join(h.describe() for h in orphans)),
                    None)
        if self.server is not None and supervised:
            return ("server_node_supervised", "%s runs under the unit supervisor, which decides for one host only; "
                    "the nodes of a server over several hosts run without it (sglang_service_supervisor: false)"
                    % self.unit, None)
        return None

    def _held_words(self, state):
        return ("%s is held by on-call (%s): systemd starts it for nobody; release the hold with "
                "`rm %s && systemctl daemon-reload` (docs/runbook.md#stop-the-automation)" % (
                    self.unit, state["held"], state["held"]))

    def _recent_starts(self, limit=5):
        """The supervisor's last starts on the host (verdict.json of each), newest first."""
        return (self.access.read(starts=limit).get("starts") or {}).get("starts") or []

    def _lock_holder(self):
        """Who holds the host's restart lock (words), or None; reads only."""
        if self.lock is None:
            return None
        dummy_rc, out, dummy_err = self._sh(host_lock.peek_cmd(self.lock.lock_dir), "lock check")
        state, now, holder = host_lock.parse_answer(out)
        if state != "HELD":
            return None
        stale = host_lock.stale_because(holder or {}, now, self.lock.controller, self.lock.alive)
        if stale:   # a restart would take it over: said, and no reason to refuse
            self.access.emit("restart lock: %s; stale (%s): a restart would take it over" % (
                host_lock.describe(holder, now), stale))
            return None
        return host_lock.describe(holder or {}, now)

    # ---- the restart -------------------------------------------------------------------
    def restart(self):
        """The whole run under the host lock: a second restart of the host fails fast,
        naming the first, and changes nothing."""
        if self.lock is not None:
            try:
                replaced = self.lock.acquire()
            except host_lock.LockHeld as exc:
                return self._hand_over("preflight", "restart_locked", str(exc),
                                       because="two restarts of one host would stop each other's start")
            except host_lock.LockError as exc:
                raise RemoteStepFailed(str(exc))
            self.record["lock"] = {"path": self.lock.lock_path, "run_id": self.lock.holder.get("run_id")}
            if replaced:
                old, why = replaced
                self.record["lock"]["replaced"] = {"holder": old, "because": why}
                self.access.emit("took over a stale restart lock (%s): %s" % (why, host_lock.describe(old)))
        try:
            return self._restart()
        except RunInterrupted as exc:
            self.note_interrupted("interrupted by %s" % exc.signame)
            raise
        finally:
            if self.lock is not None:
                problem = self.lock.release()
                if problem:
                    self.record.setdefault("lock", {})["release"] = problem
                    self._write_run_quietly()

    def _restart(self):
        state, check = self._preflight_read()
        if not state["installed"]:
            return self._hand_over("preflight", "unit_missing",
                                   "unit %s is not installed (run playbooks/site.yml first)" % self.unit)
        self._note_preflight(check)
        refusal = self._preflight_refusal(state, check)
        if refusal:
            return self._hand_over("preflight", *refusal)
        orphans = check.of_kind("orphan")

        if self.args.get("prewarm") and self.prewarm is not None:
            # While the old instance still serves: read the model into the page cache.
            self.stage = "prewarm (the old instance still serving)"
            self.record["prewarm"] = self._prewarm(dict(self.args["prewarm"]))

        if self.server is not None:
            handed_over = self._meet("preflight", "preflight", self.args["start_timeout_s"])
            if handed_over:
                return handed_over
        elif systemd_unit.is_supervised(state["exec_start"]):
            return self._supervised(orphans)

        self.outlook = metrics_step.outlook_for(os.path.dirname(self.artifacts.path), self.unit,
                                                self.args.get("metrics_dir"), self.access.shell, self.access.emit,
                                                host=self.host)
        max_attempts = self.args["max_attempts"]
        earlier_codes = []
        for n in range(1, max_attempts + 1):
            if n > 1:
                delay_s = self.options.backoff.delay_s(n - 1, self.options.rng)
                self.stage = "waiting %.0f s before attempt %d" % (delay_s, n)
                self.access.emit("restart %d of %d in %.0f s" % (n - 1, max_attempts - 1, delay_s))
                self.access.sleep(delay_s)
            self.stage = "stopping %s before attempt %d" % (self.unit, n)
            # The first stop ends a serving instance: it gets the full stop_timeout_s. Later
            # stops end a failed or stalled start, whose processes are of no use any more.
            problem = self._stop_and_release(
                self.args["stop_timeout_s"] if n == 1 else min(self.args["stop_timeout_s"],
                                                               self.args["failed_stop_timeout_s"]))
            if problem:
                return self._hand_over("stopping", problem[0], problem[1])
            if self.server is not None:
                # Start together: a node that starts alone waits at the rendezvous for the others.
                handed_over = self._meet("stopping", "released-%d" % n,
                                         self.args["stop_timeout_s"] + self.args["release_timeout_s"] + 60)
                if handed_over:
                    return handed_over
            planned = self._plan(self.record["attempts"][-1] if self.record["attempts"] else None)
            if planned is not None:
                self.access.emit("attempt %d: %s restart; %s" % (n, planned.kind, planned.words()))
                if planned.cold:
                    daemon_failed = self._restart_daemon(planned, n)
                    if daemon_failed:
                        return self._hand_over(
                            *daemon_failed,
                            because="the weight cache daemon did not come up: the engine cannot attach to its weights")
            watched = self._attempt(n)
            server_decision = None
            if self.server is not None:
                watched.assessment, server_decision = self.server.settle(
                    n, watched.assessment, max_attempts, earlier_codes, self._spin_grace_s())
            outcome = watched.assessment
            attempt = dict(self.current_attempt)
            attempt.update(watched.to_dict())
            attempt["probe_cost"] = watched.probe_cost
            self._note_plan(attempt, planned)
            self.current_attempt = None
            self.record["attempts"].append(attempt)
            if watched.ready:
                attempt["action"] = "ready"
                self.access.emit("ready after %.0f s: %s (attempt %d)" % (
                    outcome.t, outcome.reason if self.server else "a completion answered", n))
                self._budget_after_ready()
                return self._finish("ready", outcome.phase, "ready", outcome.reason)
            self.stage = "capturing diagnostics of attempt %d" % n
            self.access.emit("%s in %s after %.0f s: %s (%s); capturing diagnostics" % (
                outcome.verdict.upper(), outcome.phase, outcome.t, outcome.reason_code, outcome.reason))
            attempt["diagnostics"] = self._capture_diagnostics(n, attempt["started_epoch_s"])
            decision = server_decision or retry_policy.decide(outcome.reason_code, n, max_attempts, earlier_codes)
            if not decision.restarts and server_decision is None and n < max_attempts \
                    and outcome.reason_code in earlier_codes:
                # Rule 4: the same failure again means our verdict, not the server, may be wrong;
                # the next attempt runs observe-only instead of leaving the server down.
                upcoming = self._observe_only_next()
                if upcoming is not None:
                    decision = retry_policy.Decision(retry_policy.RESTART, "%s again, attempt %d of %d next, %s" % (
                        outcome.reason_code, n + 1, max_attempts, observe_only_words.words(upcoming)))
            earlier_codes.append(outcome.reason_code)
            attempt["action"] = "restarted" if decision.restarts else "handed_over"
            attempt["decision"] = decision.reason
            self.artifacts.write_run(self.record)
            if not decision.restarts:
                return self._hand_over(outcome.phase, outcome.reason_code, outcome.reason,
                                       because=decision.reason, verdict=outcome.verdict)
            self.outlook.restarted(outcome.reason_code)
            self.access.emit("automatic restart: " + decision.reason)
        raise AssertionError("unreachable: the policy hands over when attempts are exhausted")

    def _supervised(self, orphans):
        """A unit with its own supervisor: restart it once and stream what the supervisor
        decides; systemd restarts the unit when that can help. One decider per start.
        Leftover server processes (orphans) are killed before the restart when kill_orphans
        allows it (preflight refused them otherwise)."""
        if orphans:
            self.stage = "killing leftover server processes before restarting %s" % self.unit
            self.access.emit("killing leftover server processes: " + "; ".join(h.describe() for h in orphans))
            self.access.verb("kill-pids", pids=[h.pid for h in orphans])
            self.changed = True
            self.record["preflight"].setdefault("orphans_killed", []).extend(
                redact_secrets(h.describe()) for h in orphans)
        self.record["decided_by"] = "supervisor"
        planned = self._plan()
        self._plans = [(1, planned)]
        if planned is not None:
            self.access.emit("%s restart of %s: %s; %s" % (planned.kind, self.unit, planned.words(), self._daemon_words()))
            if planned.cold:
                failed = self._cold_before_engine(planned, 1, self.args["stop_timeout_s"])
                if failed:
                    return self._hand_over(*failed)
        self.stage = "restarting %s and following its supervisor" % self.unit
        watch = supervised_restart.SupervisedRestart(
            self.unit, self.access, self.artifacts, self.args["poll_s"], self.args["start_timeout_s"],
            after_failed_start=self._escalate if planned is not None else None)
        self.changed = True
        try:
            res = watch.run()
        except _ColdRestartFailed as exc:
            return self._hand_over(*exc.args)
        except (RuntimeError, ValueError) as exc:
            raise RemoteStepFailed("%s: %s" % (self.host, exc))
        finally:
            self.record["attempts"] = watch.attempts
            for attempt in watch.attempts:
                self._note_plan(attempt, self._plan_of(attempt["n"]))
            self._note_supervisor_settings(watch.attempts)
        last = res["last"] or {}
        if res.get("time_to_ready"):
            self.record["time_to_ready"] = res["time_to_ready"]
        if res["outcome"] == "ready":
            self.access.emit("ready after %s: decided by the unit's supervisor" % _count(len(watch.attempts), "start"))
            self._budget_after_ready()
            return self._finish("ready", "ready", "ready", last.get("reason"))
        if res["outcome"] == "timeout":
            return self._hand_over(last.get("phase") or "starting", "stall_no_progress",
                                   "no start was ready within start_timeout_s=%.0f s; last: %s" % (
                                       self.args["start_timeout_s"], last.get("progress") or last.get("reason") or "none"),
                                   because="start_timeout_s passed; the unit's supervisor still decides its start, "
                                           "nothing was stopped")
        code = last.get("reason_code") or "process_exited"
        unit_state = res["unit_state"]
        why = ("a restart cannot help (%s)" % FAILURE_CLASSES[code].why
               if code in FAILURE_CLASSES and not FAILURE_CLASSES[code].restart_helps
               else "systemd's start limit (StartLimitBurst) was reached")
        return self._hand_over(last.get("phase") or "starting", code, last.get("reason") or "",
                               because="systemd left %s %s/%s: %s" % (
                                   self.unit, unit_state.get("active"), unit_state.get("result"), why),
                               verdict=last.get("verdict"))

    def _plan_of(self, n):
        """The plan the supervised start n was made under (the last one from before it)."""
        return [p for first, p in self._plans if first <= n][-1]

    def _cold_before_engine(self, planned, n, stop_timeout_s):
        """Cold on a supervised unit: stop it (its GPUs released but for the daemon's), restart
        the daemon and follow its start. None, or the hand-over's (phase, code, reason, because)."""
        self.stage = "stopping %s for a cold restart" % self.unit
        problem = self._stop_and_release(stop_timeout_s)
        if problem:
            return ("stopping", problem[0], problem[1], None)
        daemon_failed = self._restart_daemon(planned, n)
        if daemon_failed:
            return daemon_failed + ("the weight cache daemon did not come up: the engine cannot attach to its weights",)
        return None

    def _escalate(self, attempt, dummy_unit_state):
        """after_failed_start of a supervised run: a failed warm start (or one whose class
        implicates the weights, or a daemon found unhealthy) makes the next start cold, once
        per run: the engine stopped, the daemon restarted and followed, the engine started.
        False leaves the next start to systemd."""
        current = self._plan_of(attempt["n"])
        self._note_plan(attempt, current)
        code = attempt.get("reason_code")
        if self.cold_restarts or attempt.get("verdict") == "stopped" or (
                code in FAILURE_CLASSES and not FAILURE_CLASSES[code].restart_helps):
            return False
        planned = self._plan(attempt)
        if not planned.cold:
            # systemd's next start restarts the engine unit alone: warm
            self._plans.append((attempt["n"] + 1, planned))
            return False
        self.cold_restarts += 1
        attempt["action"] = "restarted cold"
        attempt["decision"] = "next start cold: %s" % planned.reason
        self.access.emit("start %d ended %s (%s): the next start is cold (%s)" % (
            attempt["n"], attempt.get("verdict"), code, planned.reason))
        self._plans.append((attempt["n"] + 1, planned))
        stop_timeout_s = min(self.args["stop_timeout_s"], self.args["failed_stop_timeout_s"])
        failed = self._cold_before_engine(planned, attempt["n"] + 1, stop_timeout_s)
        if failed:
            raise _ColdRestartFailed(*failed)
        rc, dummy_out, err = self.access.verb("restart-no-block")
        if rc != 0:
            raise RemoteStepFailed("%s: systemctl restart of %s failed (rc %s): %s" % (
                self.host, self.unit, rc, redact_secrets((err or "").strip()[-300:])))
        self.stage = "restarting %s and following its supervisor" % self.unit
        return True

    def _note_supervisor_settings(self, attempts):
        """run.json's settings are the ones that decided: on a supervised unit, the
        supervisor's, as its newest start's trace records them."""
        for attempt in reversed(attempts):
            try:
                header, dummy_obs = read_trace(self.artifacts.abspath(attempt["trace"]))
            except TraceFormatError:
                continue
            recorded = header_settings(header)
            if recorded:
                self.record["settings"] = from_overrides(recorded).to_dict()
                self.record["settings_from"] = "the unit's supervisor (%s)" % attempt["trace"]
                if header.get("code"):
                    self.record["supervisor_code"] = header["code"]
                return

    def _prewarm(self, options):
        step_s = float(options.pop("step_s", 10.0))
        max_total_s = float(options.pop("max_total_s", 0.0))
        try:
            summary = self.prewarm(options, step_s, max_total_s)
        except Exception as exc:  # the prewarm only shortens the start; the restart goes on without it
            summary = {"failed": True, "msg": "prewarm failed: %s" % exc}
        if summary.get("failed"):
            self.access.emit("prewarm skipped: %s" % summary.get("msg"))
        return summary

    def _observe_only_next(self):
        """Rule 4 for the next attempt (observe_only_step.py): an ObserveOnly, or None. A node
        of a server over several hosts never runs observe-only: the server decides as one."""
        if self.server is not None:
            return None
        usual_s = self.outlook.estimator.usual_total_s if self.outlook is not None else None
        return observe_only_step.for_next_attempt(os.path.dirname(self.artifacts.path), self.artifacts.path,
                                                  self.record["attempts"], usual_s)

    def _attempt(self, n):
        t0 = self.access.clock()
        self.stage = "starting %s (attempt %d)" % (self.unit, n)
        self.current_attempt = {"n": n, "trace": self.artifacts.trace_relpath(n), "started": iso_utc(t0),
                                "started_epoch_s": round(t0, 3)}
        held = self._observe_only_next()
        held_words = observe_only_words.words(held) if held is not None else None
        if held is not None:
            self.current_attempt["observe_only"] = observe_only_words.to_dict(held)
        rc, dummy_out, err = self.access.verb("start")
        self.changed = True
        if rc == 124:
            self.access.emit("the start job is still waiting after %d s; watching it" % systemctl_verbs.START_JOB_WAIT_S)
        elif rc != 0:
            # The watch sees the failed unit and names it; the message says why.
            self.access.emit("systemctl start exited %s: %s" % (rc, redact_secrets((err or "").strip()[-300:])))
        self.stage = "watching the start of %s (attempt %d)" % (self.unit, n)
        self.access.emit("started %s (attempt %d of %d); probing every %.0f s%s" % (
            self.unit, n, self.args["max_attempts"], self.args["poll_s"], "; " + held_words if held_words else ""))
        trace = TraceTarget(
            path=self.artifacts.abspath(self.artifacts.trace_relpath(n)),
            name="%s-%s-attempt-%d" % (self.host, os.path.basename(self.artifacts.path), n), unit=self.unit,
            description="restart of %s on %s, attempt %d of %d%s" % (
                self.unit, self.host, n, self.args["max_attempts"], "; " + held_words if held_words else ""))
        self.outlook.begin_attempt(n)
        self.outlook.metrics.observe_only(held is not None)
        elsewhere = (lambda t: self.server.peer_outcome(n, t)) if self.server is not None else None
        return watch_start(self.access, self.options.watch(trace, self.outlook, elsewhere, held), t0,
                           self.options.new_detector)

    def _spin_grace_s(self):
        """How long a node that spins in a collective lets its peers' verdicts come first: the
        longest a peer's idle stall takes to be called beyond a spin, and two polls."""
        settings = self.options.settings
        return max(0.0, settings.stall_idle_window_s - settings.stall_spin_window_s) + 2 * self.args["poll_s"]

    def _meet(self, phase, stage, timeout_s):
        """Wait until every node of the server reached stage: None, or this node's hand-over
        naming the node that gave up or did not come."""
        self.stage = "waiting for every node of %s (%s)" % (self.server.server, stage)
        try:
            self.server.meet(stage, timeout_s)
        except server_sync.ServerAborted as exc:
            return self._hand_over(phase, "server_node_gave_up", "node %s: %s" % (exc.node, exc.reason),
                                   because="node %s of %s could not go on, and a server over several hosts "
                                           "restarts as one" % (exc.node, self.server.server))
        return None

    def _stop_and_release(self, timeout_s):
        """Stop the unit and wait (bounded) until its cgroup is empty and the GPUs are
        back to baseline. None when done, else (reason_code, reason)."""
        self.access.emit("stopping %s (timeout %.0f s)" % (self.unit, timeout_s))
        rc, dummy_out, err = self.access.verb("stop", timeout_s=timeout_s)
        self.changed = True
        if rc != 0:
            self.access.emit("stop did not finish (rc %s): sending SIGKILL to the unit's processes" % rc)
            self.access.verb("kill")
        deadline = self.access.clock() + self.args["release_timeout_s"]
        while True:
            left = self._read("process listing", "unit_processes", unit_processes=True)["unit_processes"]
            if not left:
                break
            if self.access.clock() >= deadline:
                return ("gpu_not_released", "processes of %s survived stop and SIGKILL: %s" % (
                    self.unit, "; ".join("PID %(pid)d (state %(state)s): %(cmdline)s" % p for p in left)))
            self.access.verb("kill")
            self.access.sleep(RELEASE_POLL_S)
        settle_began, nudged = self.access.clock(), False
        while True:
            state = self._unit_state()
            if host_checks.settled_after_stop(state):
                break
            if host_checks.restart_pending(state):
                # systemd's own Restart= fired meanwhile: cancel it, the procedure starts.
                self.access.verb("stop", timeout_s=systemctl_verbs.CANCEL_RESTART_STOP_S)
            elif not nudged and self.access.clock() - settle_began >= SETTLE_NUDGE_S:
                # The processes are gone (checked above) but systemd still waits for the
                # cgroup-empty notice, which some container setups never deliver; a
                # daemon-reload makes it look at the cgroup again.
                self.access.emit("no process left but %s is still %s/%s: daemon-reload so systemd sees it" % (
                    self.unit, state["active"], state["sub"]))
                self.access.verb("daemon-reload")
                nudged = True
            if self.access.clock() >= deadline:
                return ("gpu_not_released", "%s did not settle after stop (ActiveState=%s, SubState=%s)" % (
                    self.unit, state["active"], state["sub"]))
            self.access.sleep(RELEASE_POLL_S)
        killed = self.record["preflight"].setdefault("orphans_killed", [])
        while True:
            check = self._gpu_check()
            foreign = check.of_kind("foreign")
            if foreign:
                return ("gpu_busy_foreign", "GPUs held by processes outside %s: %s" % (
                    self.unit, "; ".join(h.describe() for h in foreign)))
            orphans = check.of_kind("orphan")
            if orphans:
                if not self.args["kill_orphans"]:
                    return ("orphan_processes", "leftover server processes hold GPU memory after stop: %s "
                            "(set kill_orphans: true to kill them)" % "; ".join(h.describe() for h in orphans))
                self.access.emit("killing leftover server processes: " + "; ".join(h.describe() for h in orphans))
                self.access.verb("kill-pids", pids=[h.pid for h in orphans])
                killed.extend(redact_secrets(h.describe()) for h in orphans)
            released, why = host_checks.gpu_released(check, self.args["gpu_idle_mib"])
            if released and not orphans:
                return None
            if self.access.clock() >= deadline:
                return ("gpu_not_released", why or "GPU memory not back to baseline")
            self.access.sleep(RELEASE_POLL_S)

    def _capture_diagnostics(self, n, since_epoch_s):
        """Diagnostics of attempt n into attempt-<n>/diagnostics; returns the folder's relpath."""
        result = self.access.read(diagnostics=True, since_epoch_s=since_epoch_s - 5)
        bundle = result.get("diagnostics")
        if result.get("failed") or bundle is None:
            # the attempt is recorded either way; what could not be read says why
            bundle = {"capture-failed": "capture failed: %s\n" % (result.get("msg") or result.get("missing") or "no answer")}
        for name, text in bundle.items():
            self.artifacts.write_diagnostic(n, name, text)
        return self.artifacts.diagnostics_relpath(n)

    def _note_preflight(self, check):
        self.record["preflight"].update({
            "nvidia_smi": check.available, "nvidia_smi_error": check.error, "gpus": len(check.gpus),
            "gpu_holders": [{"pid": h.pid, "kind": h.kind, "mem_mib": h.mem_mib,
                             "cmdline": redact_secrets(h.cmdline)} for h in check.holders],
        })

    # ---- endings -----------------------------------------------------------------------
    def note_interrupted(self, reason):
        """Record a run cut short by something outside the procedure (lost host, Ctrl-C).
        Nothing more is done to the service: it stays as the interruption found it."""
        if self.record.get("outcome") == "interrupted":
            return
        at = self.access.clock()
        if self.current_attempt is not None:
            began = self.current_attempt["started_epoch_s"]
            self.record["attempts"].append(dict(
                self.current_attempt, verdict="interrupted", phase="unknown", reason_code="interrupted",
                reason=redact_secrets(reason), t=round(at - began, 3), action="interrupted"))
            self.current_attempt = None
        self.record.update({"finished": iso_utc(at), "outcome": "interrupted",
                            "gave_up_because": redact_secrets(reason),
                            "interrupted": {"reason": redact_secrets(reason), "during": self.stage,
                                            "service": "left as it was at that moment: nothing was "
                                                       "stopped or started after the interruption"}})
        self._write_run_quietly()

    def _write_run_quietly(self):
        try:
            self.artifacts.write_run(self.record)
        except OSError:
            pass

    def give_up_on_error(self, message):
        return self._hand_over("unknown", "remote_step_failed", message)

    def _hand_over(self, phase, code, reason, because=None, verdict=None):
        n = len(self.record["attempts"])
        if self.server is not None:   # the other nodes stop waiting for this one
            self.server.abort(code, redact_secrets(reason))
        if because is None:
            because = "%s: %s" % (phase, code) if phase in ("preflight", "stopping") else code
        self.record["gave_up_because"] = because
        res = self._finish("gave_up", phase, code, reason, failed=True, verdict=verdict)
        title = FAILURE_CLASSES[code].title if code in FAILURE_CLASSES else code
        held = observe_only_step.summary_words(self.record["attempts"])
        kind = ("Last start %s (%s). " % (res["restart_kind"], res["restart_kind_reason"])
                if res.get("restart_kind") else "")
        res["msg"] = ("%s: gave up on %s after %s, in phase %s: %s (%s): %s. Why no restart: %s. %s%s"
                      "Artifacts: %s" % (self.host, self._unit_words(), _count(n, "attempt"), phase, title, code,
                                         redact_secrets(reason), because, "Rule 4: %s. " % held if held else "",
                                         kind, self._artifacts_words()))
        res["report"], report_error = self._write_incident_report()
        if report_error:
            res["report_error"] = report_error
            res["msg"] += ". %s" % report_error
        return res

    def _finish(self, outcome, phase, code, reason, failed=False, verdict=None):
        self.record.update({"finished": iso_utc(self.access.clock()), "outcome": outcome})
        if self.outlook is not None and self.record["attempts"]:
            self.record["time_to_ready"] = self.outlook.summary()
            self.outlook.finish(outcome, code, len(self.record["attempts"]))
        run_json = self.artifacts.write_run(self.record)
        if verdict is None:
            verdict = {"ready": "ready", "check_mode": "observed"}.get(outcome, FAILURE_CLASSES[code].verdict
                                                                       if code in FAILURE_CLASSES else "failed")
        res = {"changed": self.changed, "outcome": outcome, "verdict": verdict, "phase": phase,
               "reason_code": code, "reason": redact_secrets(reason or ""),
               "attempts": self.record["attempts"], "artifacts": self.artifacts.path, "run_json": run_json,
               "gave_up_because": self.record["gave_up_because"]}
        if failed:
            res["failed"] = True
        kind_words = ""
        if self.record.get("restart_kind"):
            res["restart_kind"] = self.record["restart_kind"]
            res["restart_kind_reason"] = self.record["restart_kind_reason"]
            res["weight_cache"] = self.record.get("weight_cache")
            kind_words = "%s restart (%s); " % (res["restart_kind"], res["restart_kind_reason"])
        if outcome == "ready":
            held = observe_only_step.summary_words(self.record["attempts"])
            res["msg"] = "%s: %s ready after %s; %s%s%sartifacts: %s" % (
                self.host, self._unit_words(), _count(len(self.record["attempts"]), "attempt"), kind_words,
                _time_to_ready_words(self.record.get("time_to_ready")), held + "; " if held else "",
                self._artifacts_words())
        return res

    def _unit_words(self):
        return self.unit if self.server is None else "%s, %s," % (self.unit, self.server.describe())

    def _artifacts_words(self):
        """The run folder; for a node of a server, the server's folder (every node's artifacts)."""
        return self.artifacts.path if self.server is None else self.server.folder

    def _write_incident_report(self):
        """(the report's paths, None), or (None, what failed) when the report could not be
        written, a broken import of its writer included: named in the run's output and
        the result, it never hides the hand-over itself (run.json is the record)."""
        try:
            # Imported here so that a broken report writer costs the report, not the restart.
            from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report import incident_report
            return incident_report.write_run_report(self.artifacts.path), None
        except Exception as exc:
            error = "incident report could not be written: %s: %s" % (type(exc).__name__, exc)
            self.access.emit(error)
            return None, error
