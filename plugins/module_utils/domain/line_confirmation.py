"""Rule 1 of the detector, "a line is a hypothesis; its kind says what confirms it".

A soft line (an out-of-memory, a traceback, "error") is confirmed (`failed`) by the process
exiting, or by the start freezing after it (a stall signature in every poll after the one
that brought it, no sign of life) within `confirm_window_s` of the line. A sign of life
after it means it was survived: the line stays as evidence.

A sticky line (sticky_lines.py: no process survives it) is confirmed by the process
exiting, or by `sticky_quiet_s` without progress after it, whatever the utilisation (the
caller passes progress only, never CPU or GPU activity, as `life`). Progress after it
restarts that clock instead of clearing the line. Pure state, no I/O.
"""
from dataclasses import dataclass, field

CONFIRMED_DEAD = "confirmed_dead"
CONFIRMED_FROZEN = "confirmed_frozen"
SURVIVED = "survived"


@dataclass
class Hypothesis:
    t: float          # journal time of the first lethal line
    code: str         # its failure class
    line: str
    phase: str
    seen_t: float     # time of the observation that brought it
    frozen_polls: int = 0
    lines: list = field(default_factory=list)
    sticky: bool = False
    progress_t: float = None   # sticky: the latest poll after the line with progress


class LineConfirmation:
    """At most one open hypothesis; `recent` keeps survived lines so a death that follows
    within `confirm_window_s` is still named after its line."""

    def __init__(self, confirm_window_s, freeze_min_s, priority, sticky_quiet_s=15.0):
        self.window_s, self.freeze_min_s, self.sticky_quiet_s = confirm_window_s, freeze_min_s, sticky_quiet_s
        self._priority = priority     # reason code -> sort key, lower is more specific
        self.open = None
        self.survived = []            # hypotheses survived, newest last

    def on_line(self, t, code, line, phase, seen_t, sticky=False):
        """A lethal line: opens the hypothesis, or sharpens the open one's class. A sticky
        line makes the open hypothesis sticky, confirmed from the poll that brought it."""
        h = self.open
        if h is None:
            self.open = Hypothesis(t, code, line, phase, seen_t, lines=[line], sticky=sticky)
            return
        h.lines.append(line)
        if self._priority(code) < self._priority(h.code):
            h.code, h.line, h.phase = code, line, phase
        if sticky and not h.sticky:
            h.sticky, h.seen_t = True, seen_t

    def judge(self, t, dead, life, frozen):
        """(outcome, hypothesis) for this poll; outcome is CONFIRMED_DEAD, CONFIRMED_FROZEN,
        SURVIVED or None (still open, or nothing open). `life`: the signs of life this poll
        (rule 2); `frozen`: the poll shows a stall signature (rule 3), or None when it says nothing."""
        h = self.open
        if dead:
            recent = h if h is not None else self._recent_survived(t)
            self.open = None
            return (CONFIRMED_DEAD, recent) if recent is not None else (None, None)
        if h is None:
            return None, None
        if h.sticky:
            return self._judge_sticky(t, h, life)
        if t <= h.seen_t:
            # the poll that brought the line measured the time before it too: only a line
            # printed after it speaks for the time since
            return (self._survive(h), h) if "log" in life else (None, None)
        if life:
            return self._survive(h), h
        if frozen:
            h.frozen_polls += 1
            if t - h.seen_t >= self.freeze_min_s or t - h.t >= self.window_s - self.freeze_min_s:
                self.open = None
                return CONFIRMED_FROZEN, h
        elif frozen is False:
            h.frozen_polls = 0
        if t - h.t > self.window_s:
            return self._survive(h), h
        return None, None

    def _judge_sticky(self, t, h, progress):
        """No progress for sticky_quiet_s after the poll that brought the line (or after the
        latest progress since) confirms it; the minute after the line running out does too."""
        if t <= h.seen_t:
            return None, None
        if progress:
            h.progress_t = t
            return None, None
        since = h.seen_t if h.progress_t is None else h.progress_t
        if t - since >= self.sticky_quiet_s or (h.progress_t is None and t - h.t >= self.window_s - self.freeze_min_s):
            self.open = None
            return CONFIRMED_FROZEN, h
        return None, None

    def _survive(self, h):
        self.open = None
        self.survived.append(h)
        del self.survived[:-8]
        return SURVIVED

    def _recent_survived(self, t):
        for h in reversed(self.survived):
            if t - h.t <= self.window_s:
                return h
        return None
