"""The restart of a unit without its own supervisor: the playbook decides every start. Up to
max_attempts attempts, each one: wait the backoff (after the first), stop the unit and
confirm it released the host (unit_stop.py), meet the other nodes of a server, restart the
weight cache daemon when the start is cold, start the unit and watch it with the detector;
then ready, or diagnostics captured and retry_policy (or the server, or rule 4's
observe-only next attempt) decides between another attempt and a hand-over.
"""
import os

from ansible_collections.sglang_ops.serving.plugins.module_utils.services import observe_only as observe_only_words
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.start_watch import TraceTarget, watch_start
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import metrics_step, observe_only_step, retry_policy, warm_cold_plan
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared import systemctl_verbs
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared.artifacts import iso_utc, redact_secrets


class AttemptLoop:
    """The attempts of a RestartRun; stop (UnitStop), weights (WarmColdPlan), meeting
    (NodeMeeting, used when run.server is set) and ending (RunEnding) are the run's units."""

    def __init__(self, run, stop, weights, meeting, ending):
        self.run = run
        self.stop = stop
        self.weights = weights
        self.meeting = meeting
        self.ending = ending
        self.earlier_codes = []   # reason code of each failed attempt so far

    def run_attempts(self):
        """Attempts until one is ready or the run hands over; the task's result."""
        run = self.run
        run.outlook = metrics_step.outlook_for(os.path.dirname(run.artifacts.path), run.unit,
                                               run.args.get("metrics_dir"), run.access.shell, run.access.emit,
                                               host=run.host)
        for n in range(1, run.args["max_attempts"] + 1):
            planned, handed_over = self._prepare(n)
            if handed_over:
                return handed_over
            ended = self._attempt(n, planned)
            if ended:
                return ended
        raise AssertionError("unreachable: the policy hands over when attempts are exhausted")

    def _prepare(self, n):
        """Everything before attempt n starts: (its RestartPlan or None, None), or (None, the
        hand-over) when the unit did not stop, a node gave up, or the daemon did not come up."""
        run, max_attempts = self.run, self.run.args["max_attempts"]
        if n > 1:
            delay_s = run.options.backoff.delay_s(n - 1, run.options.rng)
            run.stage = "waiting %.0f s before attempt %d" % (delay_s, n)
            run.access.emit("restart %d of %d in %.0f s" % (n - 1, max_attempts - 1, delay_s))
            run.access.sleep(delay_s)
        run.stage = "stopping %s before attempt %d" % (run.unit, n)
        # The first stop ends a serving instance: it gets the full stop_timeout_s. Later
        # stops end a failed or stalled start, whose processes are of no use any more.
        problem = self.stop.stop_and_release(
            run.args["stop_timeout_s"] if n == 1 else min(run.args["stop_timeout_s"], run.args["failed_stop_timeout_s"]))
        if problem:
            return None, self.ending.hand_over("stopping", problem[0], problem[1])
        if run.server is not None:
            # Start together: a node that starts alone waits at the rendezvous for the others.
            handed_over = self.meeting.meet("stopping", "released-%d" % n,
                                            run.args["stop_timeout_s"] + run.args["release_timeout_s"] + 60)
            if handed_over:
                return None, handed_over
        planned = self.weights.plan(run.record["attempts"][-1] if run.record["attempts"] else None)
        if planned is not None:
            run.access.emit("attempt %d: %s restart; %s" % (n, planned.kind, planned.words()))
            if planned.cold:
                daemon_failed = self.weights.restart_daemon(planned, n)
                if daemon_failed:
                    return None, self.ending.hand_over(*daemon_failed, because=warm_cold_plan.DAEMON_FAILED_BECAUSE)
        return planned, None

    def _attempt(self, n, planned):
        """Start and watch attempt n, record it; the result when the run ends with it, else None."""
        run = self.run
        watched = self._start_and_watch(n)
        server_decision = None
        if run.server is not None:
            watched.assessment, server_decision = self.meeting.settle(n, watched.assessment, self.earlier_codes)
        outcome = watched.assessment
        attempt = dict(run.current_attempt)
        attempt.update(watched.to_dict())
        attempt["probe_cost"] = watched.probe_cost
        missing_node = (outcome.evidence or {}).get("missing_node")
        if missing_node:
            attempt["missing_node"] = missing_node   # a peer that never came: the report names it
        self.weights.note_plan(attempt, planned)
        run.current_attempt = None
        run.record["attempts"].append(attempt)
        if watched.ready:
            attempt["action"] = "ready"
            run.access.emit("ready after %.0f s: %s (attempt %d)" % (
                outcome.t, outcome.reason if run.server else "a completion answered", n))
            self.weights.budget_after_ready()
            return self.ending.finish("ready", outcome.phase, "ready", outcome.reason)
        run.stage = "capturing diagnostics of attempt %d" % n
        run.access.emit("%s in %s after %.0f s: %s (%s); capturing diagnostics" % (
            outcome.verdict.upper(), outcome.phase, outcome.t, outcome.reason_code, outcome.reason))
        attempt["diagnostics"] = self._capture_diagnostics(n, attempt["started_epoch_s"])
        decision = server_decision or self._decide(n, outcome.reason_code)
        self.earlier_codes.append(outcome.reason_code)
        attempt["action"] = "restarted" if decision.restarts else "handed_over"
        attempt["decision"] = decision.reason
        run.artifacts.write_run(run.record)
        if not decision.restarts:
            return self.ending.hand_over(outcome.phase, outcome.reason_code, outcome.reason,
                                         because=decision.reason, verdict=outcome.verdict)
        run.outlook.restarted(outcome.reason_code)
        run.access.emit("automatic restart: " + decision.reason)
        return None

    def _decide(self, n, code):
        """retry_policy's decision after attempt n failed with code; rule 4 when it hands over
        for a failure seen before with attempts left: the next attempt runs observe-only."""
        max_attempts = self.run.args["max_attempts"]
        decision = retry_policy.decide(code, n, max_attempts, self.earlier_codes)
        if not decision.restarts and n < max_attempts and code in self.earlier_codes:
            # Rule 4: the same failure again means our verdict, not the server, may be wrong;
            # the next attempt runs observe-only instead of leaving the server down.
            upcoming = self._observe_only_next()
            if upcoming is not None:
                decision = retry_policy.Decision(retry_policy.RESTART, "%s again, attempt %d of %d next, %s" % (
                    code, n + 1, max_attempts, observe_only_words.words(upcoming)))
        return decision

    def _observe_only_next(self):
        """Rule 4 for the next attempt (observe_only_step.py): an ObserveOnly, or None. A node
        of a server over several hosts never runs observe-only: the server decides as one."""
        run = self.run
        if run.server is not None:
            return None
        usual_s = run.outlook.estimator.usual_total_s if run.outlook is not None else None
        return observe_only_step.for_next_attempt(os.path.dirname(run.artifacts.path), run.artifacts.path,
                                                  run.record["attempts"], usual_s, run.args.get("observe_only_min_ceiling_s"),
                                                  run.args.get("observe_only_ceiling_factor"))

    def _start_and_watch(self, n):
        """systemctl start, then the detector's watch of attempt n (observe-only under rule 4)."""
        run = self.run
        t0 = run.access.clock()
        run.stage = "starting %s (attempt %d)" % (run.unit, n)
        run.current_attempt = {"n": n, "trace": run.artifacts.trace_relpath(n), "started": iso_utc(t0),
                               "started_epoch_s": round(t0, 3)}
        held = self._observe_only_next()
        held_words = observe_only_words.words(held) if held is not None else None
        if held is not None:
            run.current_attempt["observe_only"] = observe_only_words.to_dict(held)
        rc, dummy_out, err = run.access.verb("start")
        run.changed = True
        if rc == 124:
            run.access.emit("the start job is still waiting after %d s; watching it" % systemctl_verbs.START_JOB_WAIT_S)
        elif rc != 0:
            # The watch sees the failed unit and names it; the message says why.
            run.access.emit("systemctl start exited %s: %s" % (rc, redact_secrets((err or "").strip()[-300:])))
        run.stage = "watching the start of %s (attempt %d)" % (run.unit, n)
        held_note = "; " + held_words if held_words else ""
        run.access.emit("started %s (attempt %d of %d); probing every %.0f s%s" % (
            run.unit, n, run.args["max_attempts"], run.args["poll_s"], held_note))
        trace = TraceTarget(
            path=run.artifacts.abspath(run.artifacts.trace_relpath(n)),
            name="%s-%s-attempt-%d" % (run.host, os.path.basename(run.artifacts.path), n), unit=run.unit,
            description="restart of %s on %s, attempt %d of %d%s" % (run.unit, run.host, n, run.args["max_attempts"], held_note))
        run.outlook.begin_attempt(n)
        run.outlook.metrics.observe_only(held is not None)
        elsewhere = self.meeting.peer_outcome(n) if run.server is not None else None
        return watch_start(run.access, run.options.watch(trace, run.outlook, elsewhere, held), t0, run.options.new_detector)

    def _capture_diagnostics(self, n, since_epoch_s):
        """Diagnostics of attempt n into attempt-<n>/diagnostics; returns the folder's relpath."""
        run = self.run
        result = run.access.read(diagnostics=True, since_epoch_s=since_epoch_s - 5)
        bundle = result.get("diagnostics")
        if result.get("failed") or bundle is None:
            # the attempt is recorded either way; what could not be read says why
            bundle = {"capture-failed": "capture failed: %s\n" % (result.get("msg") or result.get("missing") or "no answer")}
        for name, text in bundle.items():
            run.artifacts.write_diagnostic(n, name, text)
        return run.artifacts.diagnostics_relpath(n)
