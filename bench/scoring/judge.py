"""One replay verdict against its trace's label.

ready   -> verdict ready; stalled or failed is a false restart, anything else no ready.
failed  -> stalled or failed, at or after the onset (earlier: premature, a false
           restart), within Label.budget_s of it (max(60, 2 * poll_s + 1) s).
stalled -> stalled or failed, at or after the onset, within 600 s of it when the trace
           has py-spy stacks, else 1800 + 2 * poll_s s.
A patient variant (Label.patient) passes undecided to the end of its recording, however
long: its trace says the fault looks like healthy work without that channel, or that the
start is right to wait on it longer than it was recorded (expect.patient_s).
Stalled and failed both mean "act now", so either passes for either fault; the phase is
reported (phase_right), not required.
"""
import dataclasses

ONSET_SLACK_S = 1e-6
ACTED = ("stalled", "failed")

PASS = "pass"
FALSE_RESTART = "false_restart"
PREMATURE = "premature"
MISSED = "missed"
MISSED_AT_END = "missed_at_end"
LATE = "late"
NO_READY = "no_ready"
ERROR = "error"
KINDS = (PASS, FALSE_RESTART, PREMATURE, MISSED, MISSED_AT_END, LATE, NO_READY, ERROR)


@dataclasses.dataclass(frozen=True)
class Judgement:
    kind: str
    why: str
    latency_s: float | None = None
    phase_right: bool | None = None

    @property
    def ok(self):
        return self.kind == PASS

    @property
    def false_restart(self):
        """A healthy start called stalled or failed, or a fault called before its onset."""
        return self.kind in (FALSE_RESTART, PREMATURE)


def judge(label, result, end_t=None):
    """The Judgement of `result` (the replay contract's verdict dict) for `label`;
    `end_t`, the trace's last observation time, tells a miss whose budget ran out from
    one whose trace ended first (MISSED_AT_END, still not a pass)."""
    judgement = _judge_outcome(label, result, end_t)
    if label.phase is not None:
        judgement = dataclasses.replace(judgement, phase_right=result.get("phase") == label.phase)
    return judgement


def _judge_outcome(label, result, end_t):
    verdict, t = result.get("verdict"), result.get("t")
    if verdict == "error":
        return Judgement(ERROR, "replay error: %s" % str(result.get("reason", ""))[:200])
    if label.outcome == "ready":
        if verdict in ACTED:
            return Judgement(FALSE_RESTART, "FALSE RESTART: %s at t=%s (%s)" % (
                verdict, t, str(result.get("reason", ""))[:80]))
        if verdict == "ready":
            return Judgement(PASS, "ready at t=%s" % t)
        return Judgement(NO_READY, "verdict %s, never ready" % verdict)
    if verdict not in ACTED:
        if label.patient and end_t is not None and end_t >= label.onset_t - ONSET_SLACK_S:
            return Judgement(PASS, "patient: %s to the end of the recording (expect.without_gpu / without_stacks / patient_s)"
                             % verdict)
        if end_t is not None and _in_budget(label, end_t):
            return Judgement(MISSED_AT_END, "MISSED (%s); the trace ended inside the budget" % verdict)
        return Judgement(MISSED, "MISSED (%s)" % verdict)
    if t is None or t < label.onset_t - ONSET_SLACK_S:
        return Judgement(PREMATURE, "PREMATURE %s at t=%s before onset %s" % (verdict, t, label.onset_t))
    latency_s = t - label.onset_t
    why = "%s after %.0f s" % (verdict, latency_s)
    if not _in_budget(label, t):
        return Judgement(LATE, "LATE: %s (budget %.0f s)" % (why, label.budget_s), latency_s)
    return Judgement(PASS, why, latency_s)


def _in_budget(label, t):
    """Whether acting at `t` is neither before the onset nor past its budget."""
    return label.onset_t - ONSET_SLACK_S <= t and t - label.onset_t <= label.budget_s
