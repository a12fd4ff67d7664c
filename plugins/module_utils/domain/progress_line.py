"""The one-line progress an operator reads while a start is watched.

"weight_load 29/64 shards · GPU 41/96 GB · disk 1.1 GB/s · CPU 350% · http refused · 3m12s · ETA 4m10s (3m20s-5m30s, usual 10m40s)"
Used by the restart action and `sglang-ops replay --verbose`.
"""
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.durations import fmt_duration

SEP = " \u00b7 "


def _rate(bps):
    for unit, size in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if bps >= size:
            return "%.1f %s" % (bps / size, unit)
    return "%d B/s" % bps


def progress_line(assessment, estimate=None):
    """One line from an Assessment (or its to_dict()), with the ETA of an eta.Estimate."""
    a = assessment if isinstance(assessment, dict) else assessment.to_dict()
    p = a.get("progress") or {}
    parts = [a.get("phase") or "?"]
    if p.get("shards_total") and a.get("phase") in ("weight_load", "post_load"):
        parts[0] += " %s/%s shards" % (p.get("shards_done"), p["shards_total"])
    n = p.get("gpu_count")
    if n and p.get("gpu_mem_total_mib"):
        parts.append("GPU %.0f/%.0f GB%s" % (p["gpu_mem_used_mib"] / n / 1024.0, p["gpu_mem_total_mib"] / n / 1024.0,
                                             "" if n == 1 else " \u00d7%d" % n))
    if p.get("read_bps") is not None:
        parts.append("disk " + _rate(p["read_bps"]))
    if p.get("cpu_pct") is not None:
        parts.append("CPU %.0f%%" % p["cpu_pct"])
    if p.get("http") is not None:
        parts.append("http %s" % p["http"])
    parts.append(fmt_duration(p.get("elapsed_s", a.get("t")), unknown="0s"))
    if estimate is not None and estimate.text():
        parts.append(estimate.text())
    verdict = a.get("verdict")
    if verdict and verdict != "progressing":
        parts.append("%s: %s" % (verdict, a.get("reason", "")))
    return SEP.join(parts)
