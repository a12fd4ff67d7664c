"""The restart of a unit that runs its own supervisor: one decider per start. The run kills
the leftover server processes preflight found (when kill_orphans allows it), restarts the
unit once and follows what its supervisor decides (supervised_restart.py); systemd
restarts the unit when that can help. Beside the weight cache, the first start is cold
when the plan says so, and a failed warm start may make the next one cold, once per run.
"""
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import from_overrides
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.failure_classes import FAILURE_CLASSES
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import (
    TraceFormatError, header_settings, read_trace)
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import supervised_restart
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.restart_run import RemoteStepFailed, counted
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.warm_cold_plan import DAEMON_FAILED_BECAUSE
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared.artifacts import redact_secrets


class _ColdRestartFailed(Exception):
    """A cold restart's stop or daemon start failed during a supervised run: args are the
    hand-over's (phase, code, reason, because)."""


class SupervisedFollower:
    """Follows the supervised unit of a RestartRun; stop (UnitStop), weights (WarmColdPlan)
    and ending (RunEnding) are the run's units."""

    def __init__(self, run, stop, weights, ending):
        self.run = run
        self.stop = stop
        self.weights = weights
        self.ending = ending
        self.cold_restarts = 0        # cold restarts this run did after a failed start (at most one)
        self._plans = [(1, None)]     # (first supervised start, RestartPlan) in force from it on

    def follow(self, orphans):
        """Restart the unit once and stream what its supervisor decides; the task's result.
        orphans: the leftover server processes preflight found, killed before the restart
        (preflight refused them unless kill_orphans allows it)."""
        run = self.run
        if orphans:
            run.stage = "killing leftover server processes before restarting %s" % run.unit
            run.kill_orphans(orphans)
            run.changed = True
        run.record["decided_by"] = "supervisor"
        planned = self.weights.plan()
        self._plans = [(1, planned)]
        if planned is not None:
            run.access.emit("%s restart of %s: %s; %s" % (planned.kind, run.unit, planned.words(), self.weights.daemon_words()))
            if planned.cold:
                failed = self._cold_before_engine(planned, 1, run.args["stop_timeout_s"])
                if failed:
                    return self.ending.hand_over(*failed)
        run.stage = "restarting %s and following its supervisor" % run.unit
        watch = supervised_restart.SupervisedRestart(
            run.unit, run.access, run.artifacts, run.args["poll_s"], run.args["start_timeout_s"],
            after_failed_start=self._escalate if planned is not None else None)
        run.changed = True
        try:
            res = watch.run()
        except _ColdRestartFailed as exc:
            return self.ending.hand_over(*exc.args)
        except (RuntimeError, ValueError) as exc:
            raise RemoteStepFailed("%s: %s" % (run.host, exc))
        finally:
            run.record["attempts"] = watch.attempts
            for attempt in watch.attempts:
                self.weights.note_plan(attempt, self._plan_of(attempt["n"]))
            self._note_supervisor_settings(watch.attempts)
        return self._ended(res, len(watch.attempts))

    def _ended(self, res, starts):
        """The task's result once the supervised restart ended (supervised_restart's res):
        ready, or handed over because no start was ready in time or systemd gave up."""
        run = self.run
        last = res["last"] or {}
        if res.get("time_to_ready"):
            run.record["time_to_ready"] = res["time_to_ready"]
        if res["outcome"] == "ready":
            run.access.emit("ready after %s: decided by the unit's supervisor" % counted(starts, "start"))
            self.weights.budget_after_ready()
            return self.ending.finish("ready", "ready", "ready", last.get("reason"))
        if res["outcome"] == "timeout":
            return self.ending.hand_over(last.get("phase") or "starting", "stall_no_progress",
                                         "no start was ready within start_timeout_s=%.0f s; last: %s" % (
                                             run.args["start_timeout_s"], last.get("progress") or last.get("reason") or "none"),
                                         because="start_timeout_s passed; the unit's supervisor still decides its start, "
                                                 "nothing was stopped")
        code = last.get("reason_code") or "process_exited"
        unit_state = res["unit_state"]
        why = ("a restart cannot help (%s)" % FAILURE_CLASSES[code].why
               if code in FAILURE_CLASSES and not FAILURE_CLASSES[code].restart_helps
               else "systemd's start limit (StartLimitBurst) was reached")
        return self.ending.hand_over(last.get("phase") or "starting", code, last.get("reason") or "",
                                     because="systemd left %s %s/%s: %s" % (
                                         run.unit, unit_state.get("active"), unit_state.get("result"), why),
                                     verdict=last.get("verdict"))

    def _plan_of(self, n):
        """The plan the supervised start n was made under (the last one from before it)."""
        return [p for first, p in self._plans if first <= n][-1]

    def _cold_before_engine(self, planned, n, stop_timeout_s):
        """Cold on a supervised unit: stop it (its GPUs released but for the daemon's), restart
        the daemon and follow its start. None, or the hand-over's (phase, code, reason, because)."""
        self.run.stage = "stopping %s for a cold restart" % self.run.unit
        problem = self.stop.stop_and_release(stop_timeout_s)
        if problem:
            return ("stopping", problem[0], problem[1], None)
        daemon_failed = self.weights.restart_daemon(planned, n)
        if daemon_failed:
            return daemon_failed + (DAEMON_FAILED_BECAUSE,)
        return None

    def _escalate(self, attempt, dummy_unit_state):
        """after_failed_start of a supervised run: a failed warm start (or one whose class
        implicates the weights, or a daemon found unhealthy) makes the next start cold, once
        per run: the engine stopped, the daemon restarted and followed, the engine started.
        False leaves the next start to systemd."""
        run = self.run
        current = self._plan_of(attempt["n"])
        self.weights.note_plan(attempt, current)
        code = attempt.get("reason_code")
        if self.cold_restarts or attempt.get("verdict") == "stopped" or (
                code in FAILURE_CLASSES and not FAILURE_CLASSES[code].restart_helps):
            return False
        planned = self.weights.plan(attempt)
        if not planned.cold:
            # systemd's next start restarts the engine unit alone: warm
            self._plans.append((attempt["n"] + 1, planned))
            return False
        self.cold_restarts += 1
        attempt["action"] = "restarted cold"
        attempt["decision"] = "next start cold: %s" % planned.reason
        run.access.emit("start %d ended %s (%s): the next start is cold (%s)" % (
            attempt["n"], attempt.get("verdict"), code, planned.reason))
        self._plans.append((attempt["n"] + 1, planned))
        stop_timeout_s = min(run.args["stop_timeout_s"], run.args["failed_stop_timeout_s"])
        failed = self._cold_before_engine(planned, attempt["n"] + 1, stop_timeout_s)
        if failed:
            raise _ColdRestartFailed(*failed)
        rc, dummy_out, err = run.access.verb("restart-no-block")
        if rc != 0:
            raise RemoteStepFailed("%s: systemctl restart of %s failed (rc %s): %s" % (
                run.host, run.unit, rc, redact_secrets((err or "").strip()[-300:])))
        run.stage = "restarting %s and following its supervisor" % run.unit
        return True

    def _note_supervisor_settings(self, attempts):
        """run.json's settings are the ones that decided: on a supervised unit, the
        supervisor's, as its newest start's trace records them."""
        for attempt in reversed(attempts):
            try:
                header, dummy_obs = read_trace(self.run.artifacts.abspath(attempt["trace"]))
            except TraceFormatError:
                continue
            recorded = header_settings(header)
            if recorded:
                self.run.record["settings"] = from_overrides(recorded).to_dict()
                self.run.record["settings_from"] = "the unit's supervisor (%s)" % attempt["trace"]
                if header.get("code"):
                    self.run.record["supervisor_code"] = header["code"]
                return
