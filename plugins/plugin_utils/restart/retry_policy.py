"""What the restart action does after an attempt ends: restart, or hand over to a human.

Pure decisions, no I/O: the action plugin calls these and the unit tests pin them down.
A restart happens only when the failure class is one a restart can fix
(failure_classes.restart_helps), attempts remain, and the same failure has not already
been seen in this run; the waits between attempts grow and carry jitter, within bounds.
"""
import random
from dataclasses import dataclass

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.failure_classes import (
    FAILURE_CLASSES,
    restart_helps,
)

RESTART = "restart"
HAND_OVER = "hand_over"
READY = "ready"


@dataclass(frozen=True)
class Decision:
    action: str  # RESTART, HAND_OVER or READY
    reason: str  # words for the operator; for HAND_OVER it becomes run.json "gave_up_because"

    @property
    def restarts(self):
        return self.action == RESTART


@dataclass(frozen=True)
class Backoff:
    """Seconds to wait before restart number n (1 = the first restart)."""

    base_s: float = 10.0
    factor: float = 2.0
    max_s: float = 120.0
    jitter_frac: float = 0.2  # +- this fraction of the delay, so many hosts do not restart in step

    def __post_init__(self):
        if self.base_s < 0 or self.max_s < 0:
            raise ValueError("backoff base_s and max_s must not be negative")
        if self.factor < 1:
            raise ValueError("backoff factor must be >= 1")
        if not 0 <= self.jitter_frac < 1:
            raise ValueError("backoff jitter_frac must be in [0, 1)")

    def bounds_s(self, restart_n):
        """(lowest, highest) wait the jitter can give for restart number restart_n."""
        nominal = min(self.max_s, self.base_s * self.factor ** max(0, restart_n - 1))
        return nominal * (1 - self.jitter_frac), min(self.max_s, nominal * (1 + self.jitter_frac))

    def delay_s(self, restart_n, rng=random.random):
        """A wait inside bounds_s(restart_n); rng() returns a float in [0, 1)."""
        low_s, high_s = self.bounds_s(restart_n)
        return low_s + (high_s - low_s) * rng()


def decide(reason_code, attempts_so_far, max_attempts, earlier_codes=()):
    """Decide after attempt number attempts_so_far ended with reason_code.

    earlier_codes: the reason codes of the attempts before this one, oldest first.
    A code the failure table does not know (e.g. a verdict the detector adds later) is
    handed over: restarting blind is worse than asking a human.
    """
    if reason_code == READY:
        return Decision(READY, "ready")
    if reason_code not in FAILURE_CLASSES:
        return Decision(HAND_OVER, "unknown failure %r: a human decides" % reason_code)
    if reason_code in earlier_codes:
        return Decision(HAND_OVER, "same failure twice: %s" % reason_code)
    if not restart_helps(reason_code):
        return Decision(HAND_OVER, "a restart cannot fix %s (%s)" % (
            reason_code, FAILURE_CLASSES[reason_code].why))
    if attempts_so_far >= max_attempts:
        return Decision(HAND_OVER, "attempts exhausted: %d of %d used, last %s" % (
            attempts_so_far, max_attempts, reason_code))
    return Decision(RESTART, "%s: a restart can help (%s); attempt %d of %d next" % (
        reason_code, FAILURE_CLASSES[reason_code].why, attempts_so_far + 1, max_attempts))
