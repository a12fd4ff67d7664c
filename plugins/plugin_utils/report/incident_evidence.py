"""What the report offers as evidence: when the failure began and what showed it, from the
detector's decision, the journal and the measured signals. Pure functions."""
import re

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import sglang_dialect
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.redaction import redact
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared import trace_signals
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_words import fmt_duration, fmt_t

EVIDENCE_WINDOW_S = 60.0


# Words that make a log line worth quoting as the evidence of a failure.
ERROR_LINE = re.compile(
    r"error|exception|traceback|out of memory|failed|fatal|timeout|timed out|"
    r"address already in use|unbalanced|killed|abort", re.IGNORECASE)


def _numeric_last_moved(evidence):
    last = (evidence or {}).get("last_moved") or {}
    return {k: float(v) for k, v in last.items() if isinstance(v, (int, float))}


def onset(verdict, decided_t, decision, observations, lines):
    """(t, basis): when the failure began or progress stopped."""
    if decided_t is None:
        return None, "no verdict"
    if verdict == "failed":
        named = _named_fatal_texts(decision)
        for line in lines:
            if line.t <= decided_t and line.text in named:
                return line.t, "first fatal line in the journal"
        gone = _main_process_gone_t(observations, decided_t)
        if decision.get("reason_code") == "process_exited":
            # journal records carry their own time, which can be a little after the
            # observation that delivered them: look at what the deciding poll had seen
            seen = trace_signals.log_lines([o for o in observations if o["t"] <= decided_t])
            for line in seen:
                if sglang_dialect.says_main_exited(line.text):
                    return min(line.t, decided_t), "systemd saw the main process exit"
            if gone is not None:
                return gone, "main process gone"
        for line in lines:
            if line.t <= decided_t and line.t >= decided_t - 120 and ERROR_LINE.search(line.text):
                return line.t, "first error line in the journal"
        if gone is not None:
            return gone, "main process gone"
        return decided_t, "detector decision"
    if verdict == "stalled":
        last = _numeric_last_moved(decision.get("evidence"))
        if last:
            return max(last.values()), "when the last channel moved: %s" % max(last, key=last.get)
        quiet = [ln.t for ln in lines if ln.t <= decided_t]
        if quiet:
            return max(quiet), "last journal line"
    return decided_t, "detector decision"


def _named_fatal_texts(decision):
    """The fatal lines the detector named, as the report's journal lines carry them."""
    return [sglang_dialect.split_prefix(redact(str(x)))[2] for x in (decision.get("evidence") or {}).get("fatal_lines") or []]


def _main_process_gone_t(observations, decided_t):
    """The first observation, up to the decision, where the unit's main process was gone."""
    for prev, obs in zip(observations, observations[1:]):
        if obs["t"] > decided_t or not obs.get("unit"):
            continue
        unit = obs["unit"]
        was = (prev.get("unit") or {}).get("main_pid")
        if unit.get("active") in ("failed", "inactive") or (was and unit.get("main_pid") != was):
            return float(obs["t"])
    return None


def _fatal_log_lines(decision, lines, onset_t, decided_t):
    """The journal lines that made the verdict: the detector's fatal_lines when it named
    them, else error-looking lines between onset and decision."""
    named = _named_fatal_texts(decision)
    window = [ln for ln in lines if onset_t is not None and onset_t <= ln.t <= (decided_t if decided_t is not None else onset_t)]
    if named:
        picked = [ln for ln in window if ln.text in named] or [ln for ln in lines if ln.text in named]
        if picked:
            return picked
    return [ln for ln in window if ERROR_LINE.search(ln.text)]


def _ranges(numbers):
    nums = sorted(set(int(n) for n in numbers))
    if len(nums) > 2 and nums == list(range(nums[0], nums[-1] + 1)):
        return "%d-%d" % (nums[0], nums[-1])
    return ", ".join(map(str, nums))


def _detector_evidence(ev):
    """Words for the detector's evidence keys; unknown keys are shown as they are."""
    out = []
    moved = ev.get("moved")
    if isinstance(moved, (list, tuple)):
        out.append("Moving at the decision: %s" % (", ".join(map(str, moved)) or "nothing"))
    last = _numeric_last_moved(ev)
    if last:
        out.append("Last movement per channel: " + ", ".join(
            "%s at %s" % (k, fmt_t(v)) for k, v in sorted(last.items(), key=lambda kv: kv[1])))
    if isinstance(ev.get("no_progress_s"), (int, float)):
        out.append("Nothing moved for %s" % fmt_duration(ev["no_progress_s"]))
    if ev.get("signature"):
        out.append("Waiting signature: %s" % ev["signature"])
    if ev.get("spin_gpus"):
        out.append("GPUs spinning (util ~100 %%, memory flat): %s" % _ranges(ev["spin_gpus"]))
    if isinstance(ev.get("cpu_pct"), (int, float)):
        out.append("CPU of the unit's processes: %.0f %% of one core" % ev["cpu_pct"])
    stacks = ev.get("stacks")
    if isinstance(stacks, dict) and stacks:
        frames = " < ".join(map(str, (stacks.get("frames") or [])[:4]))
        out.append("py-spy: %s ranks show the same stack on samples %ss apart, parked in %s (%s)%s" % (
            stacks.get("ranks", "?"), stacks.get("gap_s", "?"), stacks.get("wait_frame", "?"), frames,
            "; CPU idle" if stacks.get("cpu_idle") else ""))
    handled = {"moved", "last_moved", "no_progress_s", "signature", "spin_gpus", "cpu_pct", "stacks",
               "fatal_lines", "fatal_phase", "unit"}
    for key, value in sorted(ev.items()):
        if key in handled or value in (None, "", [], {}):
            continue
        out.append("%s: %s" % (key.replace("_", " "), value if isinstance(value, str) else short(value)))
    return out


def evidence_lines(verdict, decision, decided_t, series, observations, lines, onset_t):
    out = []
    if decision.get("reason"):
        out.append("Detector: %s" % decision["reason"])
    if verdict == "failed":
        for ln in _fatal_log_lines(decision, lines, onset_t, decided_t)[:3]:
            out.append("Journal at %s: `%s`" % (fmt_t(ln.t), ln.render()))
    out.extend(_detector_evidence(decision.get("evidence") or {}))
    if decided_t is not None and series.t:
        out.extend(_measured(series, decided_t))
    # the decision's own observation (its assessment's t), not the run record's rounded time
    at = decision.get("t") if isinstance(decision.get("t"), (int, float)) else decided_t
    obs = _obs_at(observations, at)
    if obs:
        out.extend(_held_at_decision(obs))
    return [redact(x) for x in out]


def short(value, limit=200):
    text = str(value)
    return text if len(text) <= limit else text[:limit] + "…"


def _measured(series, at_t):
    out = []
    w = EVIDENCE_WINDOW_S
    mem = trace_signals.window_mean(series.t, series.gpu_mem_gib_mean, at_t, w)
    util = trace_signals.window_mean(series.t, series.gpu_util_pct_mean, at_t, w)
    if mem is not None:
        cap = " of %.0f GiB" % series.gpu_mem_total_gib if series.gpu_mem_total_gib else ""
        out.append("GPU memory %.1f GiB per GPU%s (%d MiB as nvidia-smi shows it), utilisation %.0f %% "
                   "(mean over the last %ds)" % (mem, cap, round(mem * 1024), util if util is not None else 0.0, w))
    cpu = trace_signals.window_mean(series.t, series.cpu_cores, at_t, w)
    if cpu is not None:
        out.append("CPU %.1f cores busy (unit's processes, last %ds)" % (cpu, w))
    disk = trace_signals.window_mean(series.t, series.disk_read_mb_s, at_t, w)
    if disk is not None:
        out.append("Disk reads %.1f MB/s (last %ds)" % (disk, w))
    done = [d for t, d in zip(series.t, series.shards_done) if d is not None and t <= at_t]
    if done and series.shards_total:
        out.append("Weight shards %d/%d" % (done[-1], series.shards_total))
    return out


def _held_at_decision(obs):
    """The unit and HTTP as the observation the decision was made on saw them; a field that
    observation did not carry is left out, never shown as None."""
    out = []
    unit = obs.get("unit") or {}
    state = "/".join(str(unit[k]) for k in ("active", "sub") if unit.get(k) is not None)
    words = ([state] if state else []) + [
        label % unit[key] for key, label in (("main_pid", "main PID %s"), ("restarts", "systemd restarts %s"))
        if unit.get(key) is not None]
    if words:
        out.append("Unit: " + ", ".join(words))
    http = obs.get("http")
    if http:
        health = http.get("health")
        out.append("HTTP /health: %s" % ("connection refused" if health is None else health))
        completion = http.get("completion")
        if isinstance(completion, dict) and completion.get("ok") is True:
            ms = completion.get("ms")
            out.append("One-token completion answered%s" % (" in %.0f ms" % ms if isinstance(ms, (int, float)) else ""))
    return out


def _obs_at(observations, t):
    """The observation a decision at t was made on: the nearest in time (the run's record
    and the trace round t apart), the later one on a tie; the last without a decision."""
    if t is None:
        return observations[-1] if observations else None
    best = None
    for obs in observations:
        if best is None or abs(obs["t"] - t) <= abs(best["t"] - t):
            best = obs
    return best
