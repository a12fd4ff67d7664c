"""Variants of a labelled trace that a robust detector must judge as it judges the trace.

Each perturbation is a function (header, observations, rng) -> (header, observations)
that leaves its inputs untouched; the variant's header names it and carries its own label
(a slower poll widens the budgets, a time shift moves the onset). Deterministic for one
random.Random seed.

  resample2x / resample3x  keep every 2nd / 3rd observation (random phase) and the last,
                           poll_s x2 / x3
  drop15                   drop a random 15% of the observations (never the last)
  jitter20                 move each observation time by U(-0.2, +0.2) * poll_s (bounds below)
  split_lines              cut every journal record in the middle, as journald at LineMax
  split_lines_rand         the same, each record cut at a random 30..70% of its length
  no_gpu                   no nvidia-smi readings (gpus, gpu_procs)
  no_stacks                no py-spy samples
  shift1e9                 every time, and the onset, + 1e9 s
  dup_samples              every observation twice at the same t, the copy without records

A dropped observation loses nothing a journal cursor keeps: its records come with the
next kept observation, and so does its latest py-spy sample when that one has none.
"""
import collections
import copy
import math

from bench.scoring.label import is_number, poll_s_of

RANDOM_CUT_FRACTION = (0.3, 0.7)
JITTER_POLL_FRACTION = 0.2
DROP_FRACTION = 0.15
SHIFT_S = 1e9
LINE_MAX = "line-max"
# Two observations jittered onto the same time are kept apart by this much.
MIN_GAP_S = 1e-3


def tagged(header, name, what):
    """A copy of `header` naming the variant."""
    out = copy.deepcopy(header)
    out["name"] = "%s+%s" % (header.get("name", "trace"), name)
    out["description"] = "%s [perturbed: %s]" % (header.get("description", ""), what)
    return out


def keep_only(observations, keep):
    """The observations at the indexes `keep`; each dropped one's journal records, and its
    latest py-spy sample when the next kept one has none, go to the next kept one."""
    keep = set(keep)
    out, pending_log, pending_stacks = [], [], None
    for i, obs in enumerate(observations):
        if i not in keep:
            pending_log += copy.deepcopy(obs.get("log") or [])
            if obs.get("stacks"):
                pending_stacks = copy.deepcopy(obs["stacks"])
            continue
        kept = copy.deepcopy(obs)
        if pending_log:
            kept["log"] = pending_log + list(kept.get("log") or [])
        if pending_stacks is not None and not kept.get("stacks"):
            kept["stacks"] = pending_stacks
        pending_log, pending_stacks = [], None
        out.append(kept)
    return out


def resample(every):
    def resample_every(header, observations, rng):
        offset = rng.randrange(every)
        keep = {i for i in range(len(observations)) if i % every == offset or i == len(observations) - 1}
        out = tagged(header, "resample%dx" % every, "every %dth observation, poll_s x%d" % (every, every))
        out["poll_s"] = poll_s_of(header) * every
        return out, keep_only(observations, keep)
    return resample_every


def drop15(header, observations, rng):
    droppable = max(len(observations) - 1, 0)  # never the last
    dropped = set(rng.sample(range(droppable), int(round(DROP_FRACTION * droppable))))
    keep = [i for i in range(len(observations)) if i not in dropped]
    return tagged(header, "drop15", "15% of observations dropped"), keep_only(observations, keep)


def jitter20(header, observations, rng):
    """Each time moved by U(-0.2, +0.2) * poll_s, with the order kept, and never before a
    record it reports, past a record the next one reports, below 0, or from after the
    label's onset to before it. Only times change."""
    poll_s = poll_s_of(header)
    onset_t = (header.get("expect") or {}).get("onset_t")
    out, prev_t = copy.deepcopy(observations), None
    for i, obs in enumerate(out):
        t = float(observations[i]["t"])
        low, high = _jitter_bounds(observations, i, poll_s, onset_t)
        new_t = round(min(max(t + rng.uniform(-JITTER_POLL_FRACTION, JITTER_POLL_FRACTION) * poll_s, low), high), 3)
        if prev_t is not None and new_t <= prev_t:
            new_t = round(prev_t + MIN_GAP_S, 3)
        obs["t"] = prev_t = new_t
    return tagged(header, "jitter20", "observation times jittered by +/-20% of poll_s"), out


def _jitter_bounds(observations, i, poll_s, onset_t):
    t = float(observations[i]["t"])
    low = 0.0 if t >= 0 else -math.inf
    high = math.inf
    mine = _record_times(observations[i])
    if mine and max(mine) <= t:
        low = max(low, max(mine))
    if i + 1 < len(observations):
        following = _record_times(observations[i + 1])
        if following and min(following) > t:
            high = min(high, min(following) - MIN_GAP_S)
        high = min(high, float(observations[i + 1]["t"]) + JITTER_POLL_FRACTION * poll_s)
    if is_number(onset_t) and t >= onset_t:
        low = max(low, float(onset_t))
    return low, high


def split_lines(header, observations, rng, random_cut=False):
    """Every journal record of two or more characters cut in two: the first part flagged
    line_break line-max as journald writes a record cut at LineMax, the second (same t)
    the rest, without the record's prefix."""
    out = copy.deepcopy(observations)
    for obs in out:
        if obs.get("log"):
            obs["log"] = [part for record in obs["log"] for part in _cut(record, rng, random_cut)]
    name = "split_lines_rand" if random_cut else "split_lines"
    return tagged(header, name, "every journal record cut in two (line-max)"), out


def split_lines_rand(header, observations, rng):
    return split_lines(header, observations, rng, random_cut=True)


def _cut(record, rng, random_cut):
    msg = record.get("msg")
    if not isinstance(msg, str) or len(msg) < 2:
        return [record]
    fraction = rng.uniform(*RANDOM_CUT_FRACTION) if random_cut else 0.5
    at = min(max(int(len(msg) * fraction), 1), len(msg) - 1)
    first = dict(record, msg=msg[:at], line_break=LINE_MAX)
    rest = {key: value for key, value in record.items() if key != "msg"}
    rest["msg"] = msg[at:]
    return [first, rest]


def without(*keys, name, what, patience_key=None):
    """Drop `keys` from every observation. When the trace's expect says `patience_key:
    "patient"` (its fault looks like healthy work without these channels for as long as it
    was recorded), the variant's label says so (label.Label.patient)."""
    def remove(header, observations, rng):
        out = copy.deepcopy(observations)
        for obs in out:
            for key in keys:
                obs.pop(key, None)
        variant = tagged(header, name, what)
        expect = variant.get("expect")
        if patience_key and isinstance(expect, dict) and expect.get(patience_key) == "patient":
            expect["patient"] = True
        return variant, out
    return remove


def shift(offset_s):
    def shift_by(header, observations, rng):
        out = copy.deepcopy(observations)
        for obs in out:
            obs["t"] = float(obs["t"]) + offset_s
            for record in obs.get("log") or ():
                if is_number(record.get("t")):
                    record["t"] = float(record["t"]) + offset_s
        shifted = tagged(header, "shift", "all times + %g s" % offset_s)
        expect = shifted.get("expect")
        if isinstance(expect, dict) and is_number(expect.get("onset_t")):
            expect["onset_t"] = float(expect["onset_t"]) + offset_s
        return shifted, out
    return shift_by


def dup_samples(header, observations, rng):
    """Every observation twice at the same t; the copy has no journal records (none
    arrived in between)."""
    out = []
    for obs in observations:
        copy_ = copy.deepcopy(obs)
        if "log" in copy_:
            copy_["log"] = []
        out += [copy.deepcopy(obs), copy_]
    return tagged(header, "dup_samples", "every observation twice at the same t"), out


PERTURBATIONS = collections.OrderedDict([
    ("resample2x", resample(2)),
    ("resample3x", resample(3)),
    ("drop15", drop15),
    ("jitter20", jitter20),
    ("split_lines", split_lines),
    ("split_lines_rand", split_lines_rand),
    ("no_gpu", without("gpus", "gpu_procs", name="no_gpu", what="no nvidia-smi fields", patience_key="without_gpu")),
    ("no_stacks", without("stacks", name="no_stacks", what="no py-spy samples", patience_key="without_stacks")),
    ("shift1e9", shift(SHIFT_S)),
    ("dup_samples", dup_samples),
])


def seed_of(seed, perturbation, trace_name):
    """The random.Random seed of one (perturbation, trace): a variant does not change when
    other traces or perturbations are added."""
    return "%d:%s:%s" % (seed, perturbation, trace_name)


def _record_times(obs):
    return [r["t"] for r in (obs.get("log") or ()) if isinstance(r, dict) and is_number(r.get("t"))]
