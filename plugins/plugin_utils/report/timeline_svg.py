"""Render an Incident's timeline as an SVG chart (pure Python, opens in any browser).

Panels share one time axis: GPU memory, GPU utilisation, weight shards, disk reads, CPU.
Phase bands run behind all panels; the verdict is a red line with its label, the onset
of the failure a dashed line. A run of several attempts is drawn on one axis, the earliest
first (t = 0: the first attempt's watch began), each earlier attempt's verdict a line of its own,
and the time between two attempts (the unit restarted, the weight cache daemon reloading the
weights before a cold start) a hatched band saying what happened there; no line is drawn
across it. Each panel keeps a strip at its top for its title and legend, above the lines.
"""
import math
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_words import fmt_duration

WIDTH_PX = 1100
LEFT_PX = 56
RIGHT_PX = 30
PLOT_W_PX = WIDTH_PX - LEFT_PX - RIGHT_PX
TOP_PX = 64
PANEL_H_PX = 92
PANEL_HEADER_PX = 17      # the panel's title and legend; the lines stay below it
GAP_PX = 22
BOTTOM_PX = 78           # the time axis, two rows of phase legend, the onset label
AFTER_DECISION_MIN_S = 120.0
AFTER_DECISION_SHARE = 0.3

# One hue per phase, far enough apart to tell the bands of neighbouring phases apart
# (tests/unit/report/test_report_timeline_svg.py checks the distance of every pair).
PHASE_COLOURS = {
    "starting": "#e0e0e0", "distributed_init": "#a4bdf5", "weight_load": "#c5e8b0",
    "post_load": "#f8ec9c", "kv_cache": "#dcb8f2", "jit_compile": "#fcc68a",
    "cuda_graph": "#94e6d4", "http_server": "#f9a8c8", "warmup": "#ef9a90", "ready": "#7fd39c",
}
BETWEEN_COLOUR = "#8c8c8c"
# What the time between two attempts was spent on, by the earlier attempt's action (run.json).
BETWEEN_WORDS = {
    "restarted cold": ("cold restart", "weight cache daemon", "reloading the weights"),
    "restarted by systemd": ("systemd restarts", "the unit"),
    "restarted": ("restart", "unit stopped, GPUs", "released, started"),
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


def _segments(ts, values, t_max, gaps=()):
    """Runs of consecutive points to draw as one line: broken where a value is missing and
    across the time between two attempts (gaps: [(from_t, to_t, ...)])."""
    seg, out = [], []
    for t, v in zip(ts, values):
        if t > t_max:
            break
        if seg and any(seg[-1][0] <= g[0] < t or seg[-1][0] < g[1] <= t for g in gaps):
            out.append(seg)
            seg = []
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


def between_attempts(inc):
    """[(from_t, to_t, lines of words)] on the run's axis: from the end of each earlier
    attempt's watch to the start of the next one's."""
    if len(inc.attempts) < 2 or inc.run_offset_s <= 0:
        return []
    out = []
    for a, b in zip(inc.attempts, inc.attempts[1:]):
        end = a.offset_s + (a.t or 0.0)
        if b.offset_s - end >= 1.0:
            words = BETWEEN_WORDS.get(a.action, ("between attempts",))
            out.append((end, b.offset_s, (words[0] + " " + fmt_duration(b.offset_s - end),) + tuple(words[1:])))
    return out


def _trace_end_t(inc):
    """Where the last observation lies on the run's axis."""
    return max([inc.run_offset_s + inc.last_t] + (inc.series.t or [0.0]))


def chart_end_t(inc):
    """Where the time axis ends: a recorded trace can run on long after the decision, and
    that tail would squeeze the part that matters; keep a margin after the decision."""
    last = _trace_end_t(inc)
    if inc.decided_t is None:
        return last or 1.0
    decided = inc.run_offset_s + inc.decided_t
    margin = max(AFTER_DECISION_MIN_S, AFTER_DECISION_SHARE * decided)
    return max(min(last, decided + margin), decided, 1.0)


@dataclass(frozen=True)
class _Frame:
    """What every part of the chart is placed by: the incident, where the time axis ends,
    the time between attempts, whether several attempts share the axis, and the panels' bottom."""
    inc: object
    t_max: float
    gaps: list
    several: bool
    bottom: int

    def x(self, t):
        return LEFT_PX + PLOT_W_PX * (t / self.t_max)


def render_svg(inc):
    """The chart: title, phase bands, the time between attempts, one panel per signal, the
    time axis, the phase legend and the markers of the attempts, the onset and the verdict."""
    panels = _panels(inc.series)
    panels_end = TOP_PX + len(panels) * (PANEL_H_PX + GAP_PX)
    frame = _Frame(inc=inc, t_max=chart_end_t(inc), gaps=between_attempts(inc),
                   several=len(inc.attempts) > 1 and inc.run_offset_s > 0, bottom=panels_end - GAP_PX)
    out = _svg_head(inc, panels_end + BOTTOM_PX)
    out += _phase_bands(frame)
    out += _between_attempt_bands(frame)
    for i, (label, lines, fixed_max) in enumerate(panels):
        out += _panel(frame, TOP_PX + i * (PANEL_H_PX + GAP_PX), label, lines, fixed_max)
    out += _time_axis(frame)
    out += _phase_legend(frame)
    out += _earlier_attempt_markers(frame)
    out += _onset_marker(frame)
    out += _verdict_marker(frame)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _svg_head(inc, height):
    """The document's opening, a white background and the chart's title."""
    title = "%s — %s%s" % (inc.unit, inc.verdict, " in %s (%s)" % (inc.phase, inc.reason_code)
                           if inc.verdict in ("failed", "stalled") else "")
    return ['<?xml version="1.0" encoding="UTF-8"?>',
            '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
            'font-family="sans-serif" font-size="11">' % (WIDTH_PX, height, WIDTH_PX, height),
            "<title>%s</title>" % escape(title),
            '<rect x="0" y="0" width="%d" height="%d" fill="white"/>' % (WIDTH_PX, height),
            '<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>' % (LEFT_PX, escape(title))]


def _phase_bands(frame):
    """A coloured band behind all panels per phase, labelled where it is wide enough."""
    out = ['<g id="phase-bands">']
    for p in frame.inc.phases:
        if p.start_t > frame.t_max:
            continue
        x0, x1 = frame.x(p.start_t), frame.x(min(max(p.end_t, p.start_t), frame.t_max))
        out.append('<rect class="phase" data-phase=%s x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>' % (
            quoteattr(p.phase), x0, TOP_PX - 14, max(x1 - x0, 0.5), frame.bottom - TOP_PX + 14,
            PHASE_COLOURS.get(p.phase, "#f4f6f6")))
        if x1 - x0 > 7 * len(p.phase) + 8:
            out.append('<text x="%.1f" y="%d" fill="#555">%s</text>' % (x0 + 3, TOP_PX - 4, escape(p.phase)))
    out.append("</g>")
    return out


def _between_attempt_bands(frame):
    """A hatched band over the time between two attempts, with a card saying what happened there."""
    if not frame.gaps:
        return []
    out = ['<defs><pattern id="between-hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
           'patternTransform="rotate(45)"><rect width="6" height="6" fill="#f2f2f2"/>'
           '<line x1="0" y1="0" x2="0" y2="6" stroke="%s" stroke-width="1.2"/></pattern></defs>' % BETWEEN_COLOUR,
           '<g id="between-attempts">']
    for t0, t1, words in frame.gaps:
        if t0 > frame.t_max:
            continue
        x0, x1 = frame.x(t0), frame.x(min(t1, frame.t_max))
        out.append('<g class="between" data-from="%.1f" data-to="%.1f"><rect x="%.1f" y="%d" width="%.1f" '
                   'height="%d" fill="url(#between-hatch)"/>' % (
                       t0, t1, x0, TOP_PX - 14, max(x1 - x0, 0.5), frame.bottom - TOP_PX + 14))
        out += _between_words_card((x0 + x1) / 2, words)
        out.append("</g>")
    out.append("</g>")
    return out


def _between_words_card(cx, words):
    """The words on a white card in the middle of the band, one line each."""
    width = 6.2 * max(len(w) for w in words) + 8
    cy = TOP_PX + PANEL_H_PX + GAP_PX // 2
    out = ['<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="white" stroke="%s" rx="3"/>' % (
        cx - width / 2, cy - 12, width, 14 * len(words) + 8, BETWEEN_COLOUR)]
    for k, w in enumerate(words):
        out.append('<text x="%.1f" y="%d" text-anchor="middle" fill="#333"%s>%s</text>' % (
            cx, cy + 2 + 14 * k, ' font-weight="bold"' if k == 0 else "", escape(w)))
    return out


def _panel(frame, top, label, lines, fixed_max):
    """One signal's panel: its frame, title, value scale, a line per series and their legend."""
    s = frame.inc.series
    values = [v for key, dummy_label, dummy_colour in lines for t, v in zip(s.t, getattr(s, key)) if v is not None and t <= frame.t_max]
    y_max = fixed_max or _nice_max(max(values) if values else 0.0)

    def y(v):
        return top + PANEL_H_PX - (PANEL_H_PX - PANEL_HEADER_PX) * min(v, y_max) / y_max

    out = ['<g class="panel" data-panel=%s>' % quoteattr(label),
           '<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>' % (LEFT_PX, top, PLOT_W_PX, PANEL_H_PX),
           '<text x="%d" y="%d" font-weight="bold">%s</text>' % (LEFT_PX + 6, top + 13, escape(label)),
           '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#ddd"/>' % (
               LEFT_PX, top + PANEL_HEADER_PX, LEFT_PX + PLOT_W_PX, top + PANEL_HEADER_PX),
           '<text x="%d" y="%d" text-anchor="end" fill="#777">%s</text>' % (LEFT_PX - 6, top + PANEL_HEADER_PX + 4, _num(y_max)),
           '<text x="%d" y="%d" text-anchor="end" fill="#777">0</text>' % (LEFT_PX - 6, top + PANEL_H_PX)]
    for n, (key, legend, colour) in enumerate(lines):
        out += _series(frame, key, colour, y)
        out.append('<text x="%d" y="%d" fill="%s">%s</text>' % (
            LEFT_PX + 150 + 110 * n, top + 13, colour, escape(legend)))
    if not values:
        out.append('<text x="%d" y="%d" fill="#999">not observed</text>' % (
            LEFT_PX + PLOT_W_PX // 2, top + PANEL_H_PX // 2))
    out.append("</g>")
    return out


def _series(frame, key, colour, y):
    """One series of the panel (y: its value scale): a line per run of points, a dot for a lone point."""
    s = frame.inc.series
    out = ['<g id=%s class="series">' % quoteattr("series-" + key)]
    for seg in _segments(s.t, getattr(s, key), frame.t_max, frame.gaps):
        if len(seg) == 1:
            out.append('<circle cx="%.1f" cy="%.1f" r="2" fill="%s"/>' % (frame.x(seg[0][0]), y(seg[0][1]), colour))
        else:
            pts = " ".join("%.1f,%.1f" % (frame.x(t), y(v)) for t, v in seg)
            out.append('<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>' % (colour, pts))
    out.append("</g>")
    return out


def _time_axis(frame):
    """The ticks and their times under the panels, what t = 0 is, and where a cut trace goes on to."""
    inc, bottom = frame.inc, frame.bottom
    out = ['<g id="time-axis">']
    step = _time_step(frame.t_max)
    tick = 0.0
    while tick <= frame.t_max + 1e-6:
        x = frame.x(tick)
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#999"/>' % (x, bottom, x, bottom + 5))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (x, bottom + 17, fmt_duration(tick)))
        tick += step
    out.append('<text x="%d" y="%d" fill="#555">%s</text>' % (
        LEFT_PX, bottom + 34, "time since attempt 1 began" if frame.several else "time since the watch began"))
    last_t = _trace_end_t(inc)
    if last_t > frame.t_max:
        out.append('<text x="%d" y="%d" text-anchor="end" fill="#555">trace continues to %s</text>' % (
            WIDTH_PX - RIGHT_PX, 22, escape(fmt_duration(last_t))))
    out.append("</g>")
    return out


def _phase_legend(frame):
    """A swatch per phase drawn (narrow bands carry no label of their own), in a second row rather than off the edge."""
    entries = []
    for p in frame.inc.phases:
        if p.phase not in [e[0] for e in entries] and p.start_t <= frame.t_max and p.end_t > p.start_t:
            entries.append((p.phase, PHASE_COLOURS.get(p.phase, "#f4f6f6")))
    if frame.gaps:
        entries.append(("between attempts", "url(#between-hatch)"))
    out = ['<g id="phase-legend">']
    lx, row = LEFT_PX + 230, 0
    for name, fill in entries:
        width = 24 + 7 * len(name)
        if lx + width > WIDTH_PX - RIGHT_PX and row == 0:
            lx, row = LEFT_PX + 230, 1
        out.append('<rect x="%d" y="%d" width="10" height="10" fill="%s" stroke="#999"/>' % (
            lx, frame.bottom + 25 + 15 * row, fill))
        out.append('<text x="%d" y="%d">%s</text>' % (lx + 14, frame.bottom + 34 + 15 * row, escape(name)))
        lx += width
    out.append("</g>")
    return out


def _earlier_attempt_markers(frame):
    """A line with its label where each earlier attempt's verdict fell, for a run of several attempts."""
    if not frame.several:
        return []
    out = ['<g id="earlier-attempts">']
    for a in frame.inc.attempts[:-1]:
        if a.t is None or a.offset_s + a.t > frame.t_max:
            continue
        xa = frame.x(a.offset_s + a.t)
        colour = VERDICT_COLOURS.get(a.verdict, "#555")
        out.append('<g class="attempt-marker" data-attempt="%d" data-verdict=%s><line x1="%.1f" y1="%d" x2="%.1f" '
                   'y2="%d" stroke="%s" stroke-width="2"/><text x="%.1f" y="%d" fill="%s">%s</text></g>' % (
                       a.n, quoteattr(a.verdict), xa, TOP_PX - 14, xa, frame.bottom, colour, xa + 4, TOP_PX - 36, colour,
                       escape("attempt %d %s (%s)" % (a.n, a.verdict, a.reason_code))))
    out.append("</g>")
    return out


def _onset_marker(frame):
    """A dashed line where a failure or a stall began."""
    inc = frame.inc
    if inc.onset_t is None or inc.verdict not in ("failed", "stalled"):
        return []
    xo = frame.x(inc.run_offset_s + inc.onset_t)
    return ['<g id="onset-marker"><line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#c0392b" '
            'stroke-dasharray="4,3"/><text x="%.1f" y="%d" fill="#c0392b" text-anchor="middle">onset %s</text></g>' % (
                xo, TOP_PX - 14, xo, frame.bottom + 5, xo, frame.bottom + 64, escape(fmt_duration(inc.onset_t)))]


def _verdict_marker(frame):
    """The verdict's line with its label, the label kept inside the chart."""
    inc = frame.inc
    if inc.decided_t is None:
        return []
    xv = frame.x(inc.run_offset_s + inc.decided_t)
    colour = VERDICT_COLOURS.get(inc.verdict, "#555")
    label = "%s%s (%s) at %s" % ("attempt %d " % inc.attempts[-1].n if frame.several else "", inc.verdict,
                                 inc.reason_code, fmt_duration(inc.decided_t))
    anchor = "end" if xv > WIDTH_PX * 0.6 else "start"
    dx = -4 if anchor == "end" else 4
    return ['<g id="verdict-marker" data-verdict=%s data-t="%.1f"><line x1="%.1f" y1="%d" x2="%.1f" y2="%d" '
            'stroke="%s" stroke-width="2.5"/><text x="%.1f" y="%d" fill="%s" font-weight="bold" '
            'text-anchor="%s">%s</text></g>' % (
                quoteattr(inc.verdict), inc.run_offset_s + inc.decided_t, xv, TOP_PX - 14, xv, frame.bottom, colour,
                xv + dx, TOP_PX - 24, colour, anchor, escape(label))]
