"""Turn trace observations into what a report shows: time series and readable log lines.

Pure functions over observation dicts (trace format sglang-trace/1, with `t`); no I/O.
Rates are computed between consecutive observations, so a missing field leaves a gap
(None) instead of a made-up value.
"""
import re
from dataclasses import dataclass, field

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import sglang_dialect
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.redaction import redact

MIB_PER_GIB = 1024.0


@dataclass
class Series:
    t: list = field(default_factory=list)
    gpu_mem_gib_mean: list = field(default_factory=list)
    gpu_mem_gib_max: list = field(default_factory=list)
    gpu_util_pct_mean: list = field(default_factory=list)
    shards_done: list = field(default_factory=list)
    disk_read_mb_s: list = field(default_factory=list)
    cpu_cores: list = field(default_factory=list)
    gpu_mem_total_gib: float = 0.0
    shards_total: int = 0

    def to_dict(self):
        return dict(self.__dict__)


@dataclass(frozen=True)
class LogLine:
    t: float
    ranks: str      # "TP1, TP4", "TP0-7" or "" for the main process
    text: str       # redacted; a tqdm blob is reduced to its last frame
    frames: int = 1  # >1 when the record was a `\r`-separated progress bar
    stamp: str = ""  # the server's own clock, when the line carried one

    def render(self):
        who = "%s: " % self.ranks if self.ranks else ""
        return who + self.text

    @property
    def note(self):
        if self.frames <= 1:
            return ""
        return ("a tqdm bar of %d frames stored as one journal record (plain `journalctl` shows it "
                "as `[N blob data]`); last frame shown" % self.frames)


def last_frame(msg):
    """(text after the last non-empty `\\r` frame, number of frames)."""
    frames = [f for f in msg.split("\r") if f.strip()]
    if not frames:
        return "", 0
    return frames[-1].strip(), len(frames)


def shard_progress(msg):
    """(done, total) from the last shard-bar frame in a record, or None."""
    found = None
    for frame in msg.split("\r"):
        m = sglang_dialect.SHARD_BAR.search(frame)
        if m:
            found = (int(m.group(2)), int(m.group(3)))
    return found


def _rank_label(ranks):
    """'TP0-7' for a full run of TP ranks, else the ranks joined by commas."""
    nums = []
    for r in ranks:
        m = re.fullmatch(r"TP(\d+)", r)
        if not m:
            return ", ".join(ranks)
        nums.append(int(m.group(1)))
    nums = sorted(set(nums))
    if len(nums) > 2 and nums == list(range(nums[0], nums[-1] + 1)):
        return "TP%d-%d" % (nums[0], nums[-1])
    return ", ".join("TP%d" % n for n in nums)


def log_lines(observations):
    """Every journal record of the trace, redacted, with lines that all ranks printed
    at the same moment folded into one (`TP0-7: Load weight begin...`)."""
    raw = []
    for obs in observations:
        for rec in obs.get("log") or []:
            msg = redact(rec.get("msg") or "")
            t = float(rec.get("t", obs.get("t", 0.0)))
            text, frames = last_frame(msg)
            stamp, ranks, text = sglang_dialect.split_prefix(text)
            if frames > 1 or not text:
                # a blob's frames carry no prefix of their own past the first
                first_stamp, first_ranks, dummy_rest = sglang_dialect.split_prefix(msg.lstrip("\r"))
                stamp, ranks = stamp or first_stamp, ranks or first_ranks
            raw.append((t, ranks, text, max(frames, 1), stamp))
    folded, index = [], {}
    for t, ranks, text, frames, stamp in raw:
        key = (round(t, 1), text)
        if ranks and key in index:
            folded[index[key]][1].append(ranks)
            continue
        index[key] = len(folded)
        folded.append([t, [ranks] if ranks else [], text, frames, stamp])
    return [LogLine(t=t, ranks=_rank_label(r) if r else "", text=text, frames=f, stamp=s)
            for t, r, text, f, s in folded]


def _gpu_stats(obs):
    gpus = obs.get("gpus")
    if not gpus:
        return None, None, None, None
    used = [g.get("mem_used_mib") for g in gpus if g.get("mem_used_mib") is not None]
    total = [g.get("mem_total_mib") for g in gpus if g.get("mem_total_mib") is not None]
    util = [g.get("util_pct") for g in gpus if g.get("util_pct") is not None]
    mean = sum(used) / len(used) / MIB_PER_GIB if used else None
    peak = max(used) / MIB_PER_GIB if used else None
    cap = max(total) / MIB_PER_GIB if total else None
    util_mean = sum(util) / len(util) if util else None
    return mean, peak, cap, util_mean


def _rate(prev_value, value, prev_t, t):
    if prev_value is None or value is None or t <= prev_t:
        return None
    return max(0.0, (value - prev_value) / (t - prev_t))


def build_series(observations):
    s = Series()
    prev = {"t": None, "read": None, "cpu": None}
    shards = None
    for obs in observations:
        t = float(obs["t"])
        mean, peak, cap, util = _gpu_stats(obs)
        for rec in obs.get("log") or []:
            shards = shard_progress(rec.get("msg") or "") or shards
        procs = obs.get("procs") or {}
        read, cpu = procs.get("read_bytes"), procs.get("cpu_s")
        s.t.append(t)
        s.gpu_mem_gib_mean.append(mean)
        s.gpu_mem_gib_max.append(peak)
        s.gpu_util_pct_mean.append(util)
        s.shards_done.append(shards[0] if shards else None)
        if shards:
            s.shards_total = shards[1]
        if cap:
            s.gpu_mem_total_gib = max(s.gpu_mem_total_gib, cap)
        if prev["t"] is None:
            s.disk_read_mb_s.append(None)
            s.cpu_cores.append(None)
        else:
            r = _rate(prev["read"], read, prev["t"], t)
            c = _rate(prev["cpu"], cpu, prev["t"], t)
            s.disk_read_mb_s.append(r / 1e6 if r is not None else None)
            s.cpu_cores.append(c)
        prev = {"t": t, "read": read, "cpu": cpu}
    return s


def window_mean(ts, values, end_t, window_s):
    """Mean of the non-missing values with end_t - window_s < t <= end_t, or None."""
    picked = [v for t, v in zip(ts, values) if v is not None and end_t - window_s < t <= end_t]
    return sum(picked) / len(picked) if picked else None
