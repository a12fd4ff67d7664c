"""What the watched start itself shows about the time it has left, as numbers the ETA blends
with the host's history (records/eta.py):

    rate_bps(read_now, read_at_entry, in_phase_s)        # bytes/s this phase has read
    bytes_left_s(want, got, bps)                         # the rest of a read at that rate
    fraction_left_s(done, in_phase_s)                    # the rest of a phase at its pace so far
    loaded_fraction(mem_now, mem_at_entry, loaded_mib)   # GPU memory filled of what a load fills
    blend(history_s, live_s, weight)                     # the two, the live one by `weight`
    live_weight(in_phase_s)                              # how far a young measure is trusted
    spread(live_s, guessed_s)                            # the range the line shows

A measure of the start's own progress (the shard bar, the bytes read against the bytes the
weights take, the GPU memory the load fills) knows this start's speed; the history knows
the phases no measure covers. The range says how sure the point is: a measured part is off
by LIVE_SPREAD either way at most, a part taken from history alone by GUESS_LOW..GUESS_HIGH
(chosen on the tuning pairs of bench/eta_pairs.py, which measures how often the range holds
the true time on its held-out pairs too). Standard library only: this runs on the
host.
"""

MIN_RATE_S = 20.0           # a measure younger than this is blended with the history
MIN_READ_BPS = 1e5          # reading slower than this is no rate to divide by
MIN_FRACTION = 0.03         # a load filled less than this says nothing of its pace yet
LIVE_SPREAD = 0.3           # a measured remainder is off by this share, either way
GUESS_LOW, GUESS_HIGH = 0.4, 2.0   # a remainder from history alone: between these multiples


def rate_bps(read_now, read_at_entry, in_phase_s):
    """Bytes per second the ranks read since the phase began, or None."""
    if read_now is None or read_at_entry is None or in_phase_s <= 0:
        return None
    rate = (read_now - read_at_entry) / in_phase_s
    return rate if rate >= MIN_READ_BPS else None


def bytes_left_s(want, got, bps):
    """Seconds to read what is left of `want` bytes at `bps`, or None."""
    if want is None or got is None or not bps or want <= got:
        return None
    return (want - got) / bps


def fraction_left_s(done, in_phase_s):
    """Seconds for the rest of a phase at the pace of its part done (0 < done < 1), or None."""
    if done is None or done < MIN_FRACTION or done >= 1.0 or in_phase_s <= 0:
        return None
    return in_phase_s * (1.0 - done) / done


def loaded_fraction(mem_now, mem_at_entry, loaded_mib):
    """The share of the weights on the GPUs: the memory filled since the load began over what
    an earlier load filled (loaded_mib), or None."""
    if mem_now is None or mem_at_entry is None or not loaded_mib or loaded_mib <= 0:
        return None
    return max(0.0, min(1.0, (mem_now - mem_at_entry) / float(loaded_mib)))


def live_weight(in_phase_s):
    """How much a measure this old counts against the history: none at the phase's start,
    all of it from 2 x MIN_RATE_S on."""
    return max(0.0, min(1.0, in_phase_s / (2.0 * MIN_RATE_S)))


def blend(history_s, live_s, weight):
    """The live seconds weighted by `weight`, the history's by the rest; either alone when the
    other is unknown."""
    if live_s is None:
        return history_s
    if history_s is None:
        return live_s
    return weight * live_s + (1.0 - weight) * history_s


def spread(live_s, guessed_s):
    """(low, high) of a remaining time made of a measured part and a part from history alone."""
    live_s, guessed_s = live_s or 0.0, guessed_s or 0.0
    return (live_s * (1.0 - LIVE_SPREAD) + guessed_s * GUESS_LOW,
            live_s * (1.0 + LIVE_SPREAD) + guessed_s * GUESS_HIGH)
