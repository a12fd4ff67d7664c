"""Rule 4 of the detector, "never keep a server down by our own verdict": when earlier
starts of the unit ended the same way (plugins/module_utils/domain/observe_only_decision.py), this start
is watched but not stopped. A stall or a line-confirmed failure is held as the non-final
verdict `observing`; only a dead process ends the start, and at the ceiling the start is
`stalled` / `stall_observe_ceiling`, for a human. Pure, no I/O.
"""
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.durations import fmt_duration

OBSERVING = "observing"
OBSERVE_ONLY = "observe_only"
CEILING_CODE = "stall_observe_ceiling"


class ObserveOnlyGate:
    """`observe_only`: None, or an object with `ceiling_s` (seconds since the start) and `why`."""

    def __init__(self, observe_only):
        self.observe_only = observe_only
        self.held = None    # the last would-be verdict, as a dict

    @property
    def active(self):
        return self.observe_only is not None

    def hold(self, assessment):
        """The Assessment to return for a would-be final `assessment` (changed in place)."""
        if not self.active:
            return assessment
        held = {"verdict": assessment.verdict, "reason_code": assessment.reason_code,
                "phase": assessment.phase, "reason": assessment.reason}
        self.held = held
        assessment.evidence["held_verdict"] = held
        assessment.evidence["held_rule"] = assessment.evidence.get("rule")
        assessment.evidence["rule"] = "rule 4: observe-only, the earlier starts ended the same way"
        assessment.verdict, assessment.reason_code = OBSERVING, OBSERVE_ONLY
        assessment.reason = "would have stopped it: %s; observe-only: %s" % (held["reason"], self.observe_only.why)
        return assessment

    def ceiling_reached(self, t):
        return self.active and t >= float(self.observe_only.ceiling_s)

    def ceiling_words(self, t):
        words = "observe-only ceiling of %s reached without the start becoming ready (%s)" % (
            fmt_duration(float(self.observe_only.ceiling_s)), self.observe_only.why)
        if self.held is not None:
            words += "; last held verdict: %s" % self.held["reason"]
        return words
