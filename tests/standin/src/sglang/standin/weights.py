"""Reading the weight shards from disk, as every stand-in process that loads weights
does (a TP rank of the server, a weight cache daemon).

Each reader takes its 1/`readers` share of every shard with pread (page cache of the
file dropped first unless `drop_page_cache` is false, no readahead), at most
`rate_bps` bytes/s, and spends at least `per_shard_s` on each shard.
"""
import json
import os
import time

MIB = 1024 * 1024


def read_slice(path, start, length, rate_bps, drop_page_cache):
    fd = os.open(path, os.O_RDONLY)
    try:
        if drop_page_cache:
            # Whole file: a partial range keeps large folios that straddle it.
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        # No readahead: storage reads follow the rate cap instead of arriving in bursts.
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        chunk = MIB if not rate_bps else int(min(MIB, max(4096, rate_bps * 0.1)))
        t0 = time.monotonic()
        done = 0
        while done < length:
            data = os.pread(fd, min(chunk, length - done), start + done)
            if not data:
                break
            done += len(data)
            if rate_bps:
                ahead = done / rate_bps - (time.monotonic() - t0)
                if ahead > 0:
                    time.sleep(ahead)
    finally:
        os.close(fd)


def read_cap_mib_s(settings, faults):
    """The read cap for all readers together: the setting, or a slow_disk fault's."""
    cap = settings.read_mib_s
    for f in faults:
        if f.kind == "slow_disk":
            cap = f.read_mib_s
    return cap


def load_shards(shards, settings, faults, local_index, readers):
    """Read this reader's share of every shard; yields the index of each shard done."""
    n = max(1, len(shards))
    per_shard_s = settings.phase_s("weight_load_s") / n
    cap = read_cap_mib_s(settings, faults)
    rate_bps = cap * MIB / readers if cap > 0 else 0
    for i, (path, size) in enumerate(shards):
        s0 = time.monotonic()
        part = size // readers
        start = local_index * part
        length = size - start if local_index == readers - 1 else part
        read_slice(path, start, length, rate_bps, settings.drop_page_cache)
        rest = per_shard_s - (time.monotonic() - s0)
        if rest > 0:
            time.sleep(rest)
        yield i


def model_config(model_path):
    """config.json of the model folder ({} when missing or unreadable)."""
    try:
        with open(os.path.join(model_path, "config.json"), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def shard_files(model_path):
    """[(path, size)] of the weight files: every *.safetensors, else *.bin / *.pt."""
    names = sorted(n for n in os.listdir(model_path) if n.endswith(".safetensors"))
    if not names:
        names = sorted(n for n in os.listdir(model_path) if n.endswith((".bin", ".pt")))
    return [(os.path.join(model_path, n), os.path.getsize(os.path.join(model_path, n))) for n in names]
