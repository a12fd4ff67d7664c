"""A trace's label (the header's `expect`) and the detection budgets that follow from it."""
import dataclasses

UNSTATED_POLL_S = 10.0
# A lethal line is confirmed by the process exiting or the start freezing: two polls and
# a second, but never less than a minute.
FAILED_MIN_BUDGET_S = 60.0
# A stall confirmed by py-spy stacks must be called within ten minutes of its onset...
STALLED_WITH_STACKS_BUDGET_S = 600.0
# ...one without stacks within half an hour (and two polls).
STALLED_BLIND_BUDGET_S = 1800.0
OUTCOMES = ("ready", "stalled", "failed")


@dataclasses.dataclass(frozen=True)
class Label:
    outcome: str
    onset_t: float | None
    phase: str | None
    poll_s: float
    has_stacks: bool
    # Set on a variant whose trace says its fault cannot be told from healthy work without
    # that variant's missing channel for as long as it was recorded (expect.without_gpu or
    # expect.without_stacks: "patient"): undecided to the end is then the right answer (rule 5), a verdict after
    # the onset is fine too, and one before it is still premature. Set too on a trace that ends
    # inside the wait its label allows after the onset (expect.patient_s, rule 6).
    patient: bool = False

    @classmethod
    def of(cls, header, observations):
        """The label of a trace; ValueError when it has none or a malformed one."""
        expect = header.get("expect")
        if not isinstance(expect, dict) or expect.get("outcome") not in OUTCOMES:
            raise ValueError("trace %s has no expect.outcome in %s" % (header.get("name"), OUTCOMES))
        onset_t = expect.get("onset_t")
        if expect["outcome"] != "ready" and not is_number(onset_t):
            raise ValueError("trace %s: a %s label needs a numeric onset_t" % (header.get("name"), expect["outcome"]))
        return cls(outcome=expect["outcome"], onset_t=None if onset_t is None else float(onset_t),
                   phase=expect.get("phase"), poll_s=poll_s_of(header),
                   has_stacks=any("stacks" in o for o in observations),
                   patient=expect.get("patient") is True or _ends_inside_its_wait(expect, observations))

    @property
    def budget_s(self):
        """Seconds after the onset within which the verdict must come (None for ready)."""
        if self.outcome == "failed":
            return max(FAILED_MIN_BUDGET_S, 2 * self.poll_s + 1)
        if self.outcome == "stalled":
            return STALLED_WITH_STACKS_BUDGET_S if self.has_stacks else STALLED_BLIND_BUDGET_S + 2 * self.poll_s
        return None


def _ends_inside_its_wait(expect, observations):
    """expect.patient_s: the fault is one the start is right to wait on this long after its
    onset (a peer node that has not come, up to the rendezvous's timeout), and the recording
    ends before that."""
    patient_s, onset_t = expect.get("patient_s"), expect.get("onset_t")
    times = [o.get("t") for o in observations[-1:]] if observations else []
    if not (is_number(patient_s) and is_number(onset_t) and times and is_number(times[0])):
        return False
    return times[0] < onset_t + patient_s


def poll_s_of(header):
    poll_s = header.get("poll_s", UNSTATED_POLL_S)
    return float(poll_s) if is_number(poll_s) and poll_s > 0 else UNSTATED_POLL_S


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)
