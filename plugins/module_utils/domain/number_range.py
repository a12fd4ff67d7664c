"""The one range check of a setting and its one wording, for every setting a user gives: the
restart action's options, the detector settings and the unit supervisor's settings file.

    poll_s must be > 0 and at most 3600, got 7200
    keep_starts in /etc/sglang/x.json must be an integer >= 1, got 0 (a number)
"""
import math


def range_words(value, low, high=None, low_ok=True, integer=False):
    """None when `value` is a finite number (an integer with `integer`) from `low` (itself
    allowed with `low_ok`) up to `high` (None: no upper bound), else what is wrong:
    'must be > 0 and at most 3600', 'must be a finite number', 'must be an integer'."""
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        return "must be %s" % kind
    if not math.isfinite(value):
        return "must be a finite number"
    if value < low or (value == low and not low_ok) or (high is not None and value > high):
        return "must be %s%s %g%s" % ("an integer " if integer else "", ">=" if low_ok else ">", low,
                                      "" if high is None else " and at most %g" % high)
    return None


def range_problem(name, value, low, high=None, low_ok=True, integer=False):
    """None, or range_words() naming the setting and the value: 'poll_s must be > 0 and at
    most 3600, got 7200'."""
    why = range_words(value, low, high, low_ok, integer)
    return None if why is None else "%s %s, got %r" % (name, why, value)
