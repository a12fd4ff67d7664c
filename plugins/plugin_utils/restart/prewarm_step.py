"""Controller side of the prewarm: call sglang_prewarm in short steps, print progress.

A module cannot stream output, so the restart action (or any controller loop) calls
the module with a small max_duration_s again and again; each call continues where the
previous one stopped (resident segments are skipped) and returns its numbers, which
become one progress line:

    prewarm 41% resident · 226/548 GB · 2.10 GB/s · 1m48s
"""
import time

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.durations import fmt_duration

PREWARM_MODULE = "sglang_ops.serving.sglang_prewarm"

# The options a caller may pass through; step_s and max_total_s belong to the loop.
MODULE_OPTIONS = ("model_path", "extra_paths", "include", "mode", "reserve_gib", "threads",
                  "read_block_mib")


def progress_line(result: dict, elapsed_s: float, read_bytes: int) -> str:
    rate = read_bytes / elapsed_s / 1e9 if elapsed_s > 0 else 0.0
    size = "%.0f/%.0f" if result["model_bytes"] >= 100e9 else "%.1f/%.1f"
    return ("prewarm %.0f%% resident · " + size + " GB · %.2f GB/s · %s") % (
        100 * result["resident_fraction_after"], result["resident_bytes_after"] / 1e9,
        result["model_bytes"] / 1e9, rate, fmt_duration(elapsed_s))


def prewarm(execute_module, emit, options: dict, step_s: float = 10.0, max_total_s: float = 0.0,
            clock=time.monotonic) -> dict:
    """Run the prewarm to the end (or until max_total_s, 0: no limit).

    execute_module(module_args) -> the module's result dict (raise or return failed).
    emit(text) prints one line. Returns a summary dict: decision, resident fraction
    before/after, read_bytes, read_s, read_bytes_per_s, done, steps, msg.
    """
    unknown = set(options) - set(MODULE_OPTIONS)
    if unknown:
        raise ValueError("unknown prewarm options: %s" % ", ".join(sorted(unknown)))
    start = clock()
    first = None
    read_bytes = 0
    steps = 0
    result = {}
    while True:
        args = dict(options, max_duration_s=step_s)
        result = execute_module(args)
        steps += 1
        if result.get("failed"):
            return {"failed": True, "msg": result.get("msg", "prewarm failed"), "steps": steps}
        if first is None:
            first = result
            emit(result["decision"]["words"])
        read_bytes += result["read_bytes"]
        elapsed = clock() - start
        if result["decision"]["prewarm"]:
            emit(progress_line(result, elapsed, read_bytes))
        if result["done"] or not result["decision"]["prewarm"]:
            break
        if max_total_s and elapsed >= max_total_s:
            emit("prewarm stopped after %s (limit %ss); the rest loads from disk"
                 % (fmt_duration(elapsed), max_total_s))
            break
    elapsed = clock() - start
    summary = {
        "decision": first["decision"],
        "resident_fraction_before": first["resident_fraction_before"],
        "resident_fraction_after": result["resident_fraction_after"],
        "model_bytes": first["model_bytes"],
        "read_bytes": read_bytes,
        "read_s": round(elapsed, 3),
        "read_bytes_per_s": round(read_bytes / elapsed, 1) if elapsed > 0 else 0.0,
        "done": result["done"],
        "steps": steps,
    }
    summary["msg"] = "prewarm: %.0f%% -> %.0f%% resident, %.1f GB read in %s (%.2f GB/s)" % (
        100 * summary["resident_fraction_before"], 100 * summary["resident_fraction_after"],
        read_bytes / 1e9, fmt_duration(elapsed), summary["read_bytes_per_s"] / 1e9)
    if not first["decision"]["prewarm"]:
        summary["msg"] = first["decision"]["words"]
    return summary
