"""The restart procedure of one host, as an operator would follow it: preflight (refuse a
host that must not be touched), prewarm, then either the playbook's own attempts (stop,
confirm the unit's processes are gone and the GPUs released, start, watch, and on a failure
capture diagnostics and restart or hand over: attempt_loop.py) or, for a unit with its own
supervisor, one restart followed (supervised_follower.py). Check mode observes once and
says what a restart would do, from the same preflight (check_mode_observation.py).

RestartProcedure builds the units of one run around one RestartRun (restart_run.py), the
state they share: the preflight (preflight.py), the warm/cold plan beside the weight cache
(warm_cold_plan.py), the stop (unit_stop.py), the meeting of a server's nodes
(node_meeting.py) and the run's ending: hand-over, ready or interrupted (run_ending.py).
Everything that touches the host goes through one host access (remote_host_access.py), so
the procedure runs in unit tests against a scripted host; the action plugin plugs in
Ansible. All state is per instance: one instance per host and task, nothing module-global.
"""
import dataclasses
import random
import signal

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector import Detector
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import DetectorSettings
from ansible_collections.sglang_ops.serving.plugins.module_utils.host import systemd_unit
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_history import with_phase_history
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.start_watch import WatchOptions
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import host_lock
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.attempt_loop import AttemptLoop
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.check_mode_observation import CheckModeObservation
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.node_meeting import NodeMeeting
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.preflight import Preflight
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.restart_run import RemoteStepFailed, RestartRun
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.run_ending import RunEnding
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.supervised_follower import SupervisedFollower
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.unit_stop import UnitStop
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.warm_cold_plan import WarmColdPlan


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
        settings = with_phase_history(self.settings, getattr(outlook, "history", None))
        return WatchOptions(poll_s=self.args["poll_s"], start_timeout_s=self.args["start_timeout_s"],
                            settings=settings, trace=trace, outlook=outlook,
                            decided_elsewhere=decided_elsewhere, observe_only=observe_only)


def _shared(name, doc):
    """A property of RestartProcedure that is the RestartRun's attribute of that name: what
    the action (and a test) reads or sets on the procedure is what every unit sees."""
    return property(lambda self: getattr(self.run, name), lambda self, value: setattr(self.run, name, value), doc=doc)


class RestartProcedure:
    """One host's restart: restart() under the host lock, or observe_once() in check mode."""
    host = _shared("host", "the inventory host")
    options = _shared("options", "RestartOptions")
    access = _shared("access", "the host access")
    artifacts = _shared("artifacts", "RunArtifacts of the run")
    prewarm = _shared("prewarm", "prewarm(options, step_s, max_total_s) -> summary (issue: shorter restarts), or None")
    lock = _shared("lock", "host_lock.HostLock, or None where no other run can interfere (tests)")
    server = _shared("server", "server_sync.ServerSync when the host is one node of a server, else None")
    record = _shared("record", "run.json as the run goes")
    changed = _shared("changed", "whether the run changed anything on the host")
    stage = _shared("stage", "what the procedure is doing, for an interruption's record")

    def __init__(self, host, options, access, artifacts, prewarm=None, lock=None, server=None):
        self.run = RestartRun(host, options, access, artifacts, lock=lock, server=server, prewarm=prewarm)
        self.ending = RunEnding(self.run)
        self.weights = WarmColdPlan(self.run)
        self.preflight = Preflight(self.run, self.weights)
        self.stop = UnitStop(self.run, self.weights)

    @property
    def args(self):
        return self.run.args

    def observe_once(self, supervised_settings=None):
        """Check mode: CheckModeObservation.observe_once."""
        return CheckModeObservation(self.run, self.preflight, self.weights, self.ending).observe_once(supervised_settings)

    def restart(self):
        """The whole run under the host lock: a second restart of the host fails fast,
        naming the first, and changes nothing."""
        if self.lock is not None:
            try:
                self._take_lock()
            except host_lock.LockHeld as exc:
                return self.ending.hand_over("preflight", "restart_locked", str(exc),
                                             because="two restarts of one host would stop each other's start")
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
                    self.ending.write_run_quietly()

    def _take_lock(self):
        """The host lock taken (a stale one taken over, said and recorded); LockHeld when
        another run holds it."""
        try:
            replaced = self.lock.acquire()
        except host_lock.LockError as exc:
            raise RemoteStepFailed(str(exc))
        self.record["lock"] = {"path": self.lock.lock_path, "run_id": self.lock.holder.get("run_id")}
        if replaced:
            old, why = replaced
            self.record["lock"]["replaced"] = {"holder": old, "because": why}
            self.access.emit("took over a stale restart lock (%s): %s" % (why, host_lock.describe(old)))

    def _restart(self):
        """Preflight, prewarm, then the supervised follow or the attempts (a server's nodes
        meet first)."""
        state, check = self.preflight.read()
        if not state["installed"]:
            return self.ending.hand_over("preflight", "unit_missing",
                                         "unit %s is not installed (run playbooks/site.yml first)" % self.run.unit)
        self.preflight.note(check)
        refusal = self.preflight.refusal(state, check)
        if refusal:
            return self.ending.hand_over("preflight", *refusal)
        if self.args.get("prewarm") and self.prewarm is not None:
            # While the old instance still serves: read the model into the page cache.
            self.stage = "prewarm (the old instance still serving)"
            self.record["prewarm"] = self._prewarm(dict(self.args["prewarm"]))
        meeting = NodeMeeting(self.run, self.ending)
        if self.server is not None:
            handed_over = meeting.meet("preflight", "preflight", self.args["start_timeout_s"])
            if handed_over:
                return handed_over
        elif systemd_unit.is_supervised(state["exec_start"]):
            return SupervisedFollower(self.run, self.stop, self.weights, self.ending).follow(check.of_kind("orphan"))
        return AttemptLoop(self.run, self.stop, self.weights, meeting, self.ending).run_attempts()

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

    def note_interrupted(self, reason):
        """RunEnding.note_interrupted: a run cut short from outside, recorded."""
        self.ending.note_interrupted(reason)

    def give_up_on_error(self, message):
        """The hand-over of a run a failed remote step (RemoteStepFailed) ended."""
        return self.ending.hand_over("unknown", "remote_step_failed", message)
