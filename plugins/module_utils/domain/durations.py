"""The one way a duration is written for people: '45s', '9m43s', '1h02m'."""


def fmt_duration(seconds, unknown="?"):
    """Whole seconds below a minute, minutes and seconds below an hour, then hours and
    minutes; `unknown` for None. A negative duration (clocks of two machines) reads 0s."""
    if seconds is None:
        return unknown
    s = max(0, int(round(seconds)))
    if s < 60:
        return "%ds" % s
    if s < 3600:
        return "%dm%02ds" % divmod(s, 60)
    h, rem = divmod(s, 3600)
    return "%dh%02dm" % (h, rem // 60)
