"""Render an Incident's timeline as an SVG chart (pure Python, opens in any browser).

Panels share one time axis: GPU memory, GPU utilisation, weight shards, disk reads, CPU.
Phase bands run behind all panels; the verdict is a red line with its label, the onset
of the failure a dashed line. A run of several attempts is drawn on one axis, the earliest
first (t = 0: the first attempt's watch began), each earlier attempt's verdict a line of its own.
"""
import math
from xml.sax.saxutils import escape, quoteattr

from ansible_collections.sglang_ops.serving.plugins.plugin_utils.incident_words import fmt_duration

WIDTH_PX = 1100
LEFT_PX = 56
RIGHT_PX = 30
TOP_PX = 64
PANEL_H_PX = 92
GAP_PX = 22
BOTTOM_PX = 64
AFTER_DECISION_MIN_S = 120.0
AFTER_DECISION_SHARE = 0.3

PHASE_COLOURS = {
    "starting": "#eeeeee", "distributed_init": "#dbe9f6", "weight_load": "#dff0d8",
    "post_load": "#fcf3cf", "kv_cache": "#e8daef", "jit_compile": "#fdebd0",
    "cuda_graph": "#d6eaf8", "http_server": "#d1f2eb", "warmup": "#fadbd8", "ready": "#d5f5e3",
}
VERDICT_COLOURS = {"failed": "#c0392b", "stalled": "#c0392b", "ready": "#1e8449"}


def _panels(series):
    cap = series.gpu_mem_total_gib or None
    return [
        ("GPU memory (GiB)", [("gpu_mem_gib_mean", "mean per GPU", "#1f77b4"),
                              ("gpu_mem_gib_max", "max GPU", "#7fb3d5")], cap),
        ("GPU util (%)", [("gpu_util_pct_mean", "mean", "#8e44ad")], 100.0),
        ("weight shards", [("shards_done", "done", "#27ae60")], float(series.shards_total) or None),
        ("disk read (MB/s)", [("disk_read_mb_s", "unit cgroup", "#d35400")], None),
        ("CPU (cores)", [("cpu_cores", "unit cgroup", "#34495e")], None),
    ]


def _num(value):
    return ("%.1f" % value).rstrip("0").rstrip(".")


def _segments(ts, values, t_max):
    seg, out = [], []
    for t, v in zip(ts, values):
        if t > t_max:
            break
        if v is None:
            if seg:
                out.append(seg)
            seg = []
        else:
            seg.append((t, v))
    if seg:
        out.append(seg)
    return out


def _nice_max(value):
    """The smallest of 1, 2, 2.5, 5 × 10^k that is >= value (axis top)."""
    if not value or value <= 0:
        return 1.0
    scale = 10.0 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * scale >= value * 0.999999:
            return step * scale
    return 10 * scale


_TIME_STEPS_S = (5, 10, 15, 30, 60, 120, 300, 600, 900, 1200, 1800, 3600, 7200, 10800)


def _time_step(t_max, ticks=8):
    for step in _TIME_STEPS_S:
        if t_max / step <= ticks:
            return float(step)
    return float(_TIME_STEPS_S[-1])


def chart_end_t(inc):
    """Where the time axis ends: a recorded trace can run on long after the decision, and
    that tail would squeeze the part that matters; keep a margin after the decision."""
    last = max([inc.run_offset_s + inc.last_t] + (inc.series.t or [0.0]))
    if inc.decided_t is None:
        return last or 1.0
    decided = inc.run_offset_s + inc.decided_t
    margin = max(AFTER_DECISION_MIN_S, AFTER_DECISION_SHARE * decided)
    return max(min(last, decided + margin), decided, 1.0)


def render_svg(inc):
    s = inc.series
    t_max = chart_end_t(inc)
    last_t = max([inc.run_offset_s + inc.last_t] + (s.t or [0.0]))
    several = len(inc.attempts) > 1 and inc.run_offset_s > 0
    panels = _panels(s)
    height = TOP_PX + len(panels) * (PANEL_H_PX + GAP_PX) + BOTTOM_PX
    plot_w = WIDTH_PX - LEFT_PX - RIGHT_PX

    def x(t):
        return LEFT_PX + plot_w * (t / t_max)

    title = "%s — %s%s" % (inc.unit, inc.verdict, " in %s (%s)" % (inc.phase, inc.reason_code)
                           if inc.verdict in ("failed", "stalled") else "")
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
           'font-family="sans-serif" font-size="11">' % (WIDTH_PX, height, WIDTH_PX, height),
           "<title>%s</title>" % escape(title),
           '<rect x="0" y="0" width="%d" height="%d" fill="white"/>' % (WIDTH_PX, height),
           '<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>' % (LEFT_PX, escape(title))]
    bottom = TOP_PX + len(panels) * (PANEL_H_PX + GAP_PX) - GAP_PX

    out.append('<g id="phase-bands">')
    for p in inc.phases:
        if p.start_t > t_max:
            continue
        x0, x1 = x(p.start_t), x(min(max(p.end_t, p.start_t), t_max))
        out.append('<rect class="phase" data-phase=%s x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>' % (
            quoteattr(p.phase), x0, TOP_PX - 14, max(x1 - x0, 0.5), bottom - TOP_PX + 14,
            PHASE_COLOURS.get(p.phase, "#f4f6f6")))
        if x1 - x0 > 7 * len(p.phase) + 8:
            out.append('<text x="%.1f" y="%d" fill="#555">%s</text>' % (x0 + 3, TOP_PX - 4, escape(p.phase)))
    out.append("</g>")

    for i, (label, lines, fixed_max) in enumerate(panels):
        top = TOP_PX + i * (PANEL_H_PX + GAP_PX)
        values = [v for key, dummy_label, dummy_colour in lines for t, v in zip(s.t, getattr(s, key)) if v is not None and t <= t_max]
        y_max = fixed_max or _nice_max(max(values) if values else 0.0)

        def y(v, top=top, y_max=y_max):
            return top + PANEL_H_PX - PANEL_H_PX * min(v, y_max) / y_max

        out.append('<g class="panel" data-panel=%s>' % quoteattr(label))
        out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>' % (
            LEFT_PX, top, plot_w, PANEL_H_PX))
        out.append('<text x="%d" y="%d" font-weight="bold">%s</text>' % (LEFT_PX + 6, top + 13, escape(label)))
        out.append('<text x="%d" y="%d" text-anchor="end" fill="#777">%s</text>' % (LEFT_PX - 6, top + 10, _num(y_max)))
        out.append('<text x="%d" y="%d" text-anchor="end" fill="#777">0</text>' % (LEFT_PX - 6, top + PANEL_H_PX))
        for n, (key, legend, colour) in enumerate(lines):
            out.append('<g id=%s class="series">' % quoteattr("series-" + key))
            for seg in _segments(s.t, getattr(s, key), t_max):
                pts = " ".join("%.1f,%.1f" % (x(t), y(v)) for t, v in seg)
                if len(seg) == 1:
                    out.append('<circle cx="%.1f" cy="%.1f" r="2" fill="%s"/>' % (x(seg[0][0]), y(seg[0][1]), colour))
                else:
                    out.append('<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>' % (colour, pts))
            out.append("</g>")
            out.append('<text x="%d" y="%d" fill="%s">%s</text>' % (
                LEFT_PX + 150 + 110 * n, top + 13, colour, escape(legend)))
        if not values:
            out.append('<text x="%d" y="%d" fill="#999">not observed</text>' % (
                LEFT_PX + plot_w // 2, top + PANEL_H_PX // 2))
        out.append("</g>")

    # time axis
    out.append('<g id="time-axis">')
    step = _time_step(t_max)
    tick = 0.0
    while tick <= t_max + 1e-6:
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#999"/>' % (x(tick), bottom, x(tick), bottom + 5))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (x(tick), bottom + 17, fmt_duration(tick)))
        tick += step
    out.append('<text x="%d" y="%d" fill="#555">%s</text>' % (
        LEFT_PX, bottom + 34, "time since attempt 1 began" if several else "time since the watch began"))
    if last_t > t_max:
        out.append('<text x="%d" y="%d" text-anchor="end" fill="#555">trace continues to %s</text>' % (
            WIDTH_PX - RIGHT_PX, 22, escape(fmt_duration(last_t))))
    out.append("</g>")

    # phase legend: narrow bands carry no label of their own
    out.append('<g id="phase-legend">')
    lx = LEFT_PX + 230
    seen = []
    for p in inc.phases:
        if p.phase in seen:
            continue
        seen.append(p.phase)
        out.append('<rect x="%d" y="%d" width="10" height="10" fill="%s" stroke="#999"/>' % (
            lx, bottom + 25, PHASE_COLOURS.get(p.phase, "#f4f6f6")))
        out.append('<text x="%d" y="%d">%s</text>' % (lx + 14, bottom + 34, escape(p.phase)))
        lx += 24 + 7 * len(p.phase)
    out.append("</g>")

    if several:
        out.append('<g id="earlier-attempts">')
        for a in inc.attempts[:-1]:
            if a.t is None or a.offset_s + a.t > t_max:
                continue
            xa = x(a.offset_s + a.t)
            colour = VERDICT_COLOURS.get(a.verdict, "#555")
            out.append('<g class="attempt-marker" data-attempt="%d" data-verdict=%s><line x1="%.1f" y1="%d" x2="%.1f" '
                       'y2="%d" stroke="%s" stroke-width="2"/><text x="%.1f" y="%d" fill="%s">%s</text></g>' % (
                           a.n, quoteattr(a.verdict), xa, TOP_PX - 14, xa, bottom, colour, xa + 4, TOP_PX - 36, colour,
                           escape("attempt %d %s (%s)" % (a.n, a.verdict, a.reason_code))))
        out.append("</g>")
    off = inc.run_offset_s
    if inc.onset_t is not None and inc.verdict in ("failed", "stalled"):
        xo = x(off + inc.onset_t)
        out.append('<g id="onset-marker"><line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#c0392b" '
                   'stroke-dasharray="4,3"/><text x="%.1f" y="%d" fill="#c0392b" text-anchor="middle">onset %s</text></g>' % (
                       xo, TOP_PX - 14, xo, bottom + 5, xo, bottom + 50, escape(fmt_duration(inc.onset_t))))
    if inc.decided_t is not None:
        xv = x(off + inc.decided_t)
        colour = VERDICT_COLOURS.get(inc.verdict, "#555")
        label = "%s%s (%s) at %s" % ("attempt %d " % inc.attempts[-1].n if several else "", inc.verdict,
                                     inc.reason_code, fmt_duration(inc.decided_t))
        anchor = "end" if xv > WIDTH_PX * 0.6 else "start"
        dx = -4 if anchor == "end" else 4
        out.append('<g id="verdict-marker" data-verdict=%s data-t="%.1f"><line x1="%.1f" y1="%d" x2="%.1f" y2="%d" '
                   'stroke="%s" stroke-width="2.5"/><text x="%.1f" y="%d" fill="%s" font-weight="bold" '
                   'text-anchor="%s">%s</text></g>' % (
                       quoteattr(inc.verdict), off + inc.decided_t, xv, TOP_PX - 14, xv, bottom, colour,
                       xv + dx, TOP_PX - 24, colour, anchor, escape(label)))
    out.append("</svg>")
    return "\n".join(out) + "\n"
