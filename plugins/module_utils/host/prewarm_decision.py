"""Whether to read the model into the page cache before a restart, and why.

Pure logic: the caller measures MemAvailable and the model's residency.

MemAvailable already counts clean page cache as available, including the model pages
that are resident now. So the memory that must hold the part still on disk is
MemAvailable minus the resident model bytes, and it must keep a safety margin for
everything else on the host (the new server's own host memory while it loads, other
services). Reading more than fits makes the kernel evict the pages read first, so the
start reads them from disk again and the prewarm only cost time and I/O.
"""
from dataclasses import dataclass

MODES = ("off", "auto", "on")


@dataclass(frozen=True)
class PrewarmDecision:
    prewarm: bool
    # off | already_resident | fits | does_not_fit | forced | no_files
    code: str
    words: str
    missing_bytes: int      # model bytes not in the page cache now
    room_bytes: int         # memory the missing bytes can use (MemAvailable - resident - margin)

    def to_dict(self) -> dict:
        return {"prewarm": self.prewarm, "code": self.code, "words": self.words,
                "missing_bytes": self.missing_bytes, "room_bytes": self.room_bytes}


# Below this fraction of the model still on disk, reading it is not worth a decision.
RESIDENT_ENOUGH_FRACTION = 0.999


def gib(n_bytes: int) -> str:
    if abs(n_bytes) < 2**30:
        return "%.0f MiB" % (n_bytes / 2**20)
    return "%.1f GiB" % (n_bytes / 2**30)


def decide(mode: str, mem_available_bytes: int, model_bytes: int, resident_bytes: int,
           margin_bytes: int) -> PrewarmDecision:
    if mode not in MODES:
        raise ValueError("mode must be one of %s, not %r" % ("/".join(MODES), mode))
    if min(mem_available_bytes, model_bytes, resident_bytes, margin_bytes) < 0:
        raise ValueError("byte counts cannot be negative")
    resident_bytes = min(resident_bytes, model_bytes)
    missing = model_bytes - resident_bytes
    room = mem_available_bytes - resident_bytes - margin_bytes
    state = ("%s of %s resident, %s still on disk; %s available, %s kept free"
             % (gib(resident_bytes), gib(model_bytes), gib(missing),
                gib(mem_available_bytes), gib(margin_bytes)))

    def result(prewarm, code, why):
        return PrewarmDecision(prewarm, code, "%s: %s (%s)" % ("prewarm" if prewarm else "no prewarm",
                                                               why, state), missing, room)

    if mode == "off":
        return result(False, "off", "mode is off")
    if model_bytes == 0:
        return result(False, "no_files", "no model files to read")
    if resident_bytes >= model_bytes * RESIDENT_ENOUGH_FRACTION:
        return result(False, "already_resident", "the model is already in the page cache")
    if missing <= room:
        return result(True, "fits", "the missing %s fits in memory with the margin kept"
                      % gib(missing))
    short = missing - room
    if mode == "on":
        return result(True, "forced",
                      "mode is on, reading although it is %s short of memory; the kernel will "
                      "evict the pages read first, so part of the model will come from disk again"
                      % gib(short))
    return result(False, "does_not_fit",
                  "the missing %s does not fit: %s short after keeping the margin; reading it "
                  "would evict pages read earlier and slow the host for nothing"
                  % (gib(missing), gib(short)))
