"""Which frames of a py-spy stack are waits: a wait primitive or a collective (WAIT_FRAME), and
among them a device synchronize (DEVICE_SYNC), where only the GPU says whether work goes on.
Pure, no I/O."""
import functools
import re

WAIT_FRAME = re.compile(r"wait|barrier|futex|poll|select|recv|sleep|acquire|join|synchroni[sz]e|"
                        r"all_?reduce|all_?gather|broadcast|reduce_?scatter|all_?to_?all|nccl|accept|lock", re.I)
# A device synchronize is where GPU-bound work (autotune, benchmarking) waits too: without a
# GPU reading it proves nothing.
DEVICE_SYNC = re.compile(r"synchroni[sz]e|elapsed_time|do_bench|bench", re.I)


@functools.lru_cache(maxsize=1024)
def wait_frame(frames, depth):
    """The first of the `depth` innermost frames that is a wait primitive, else None."""
    for f in frames[:depth]:
        name = f.strip().split(" ", 1)[0]
        if WAIT_FRAME.search(name):
            return name
    return None


@functools.lru_cache(maxsize=1024)
def host_wait_frame(frames, depth):
    """A collective or host wait among the `depth` innermost frames (a device synchronize is not one)."""
    for f in frames[:depth]:
        name = f.strip().split(" ", 1)[0]
        if WAIT_FRAME.search(name) and not DEVICE_SYNC.search(name):
            return name
    return None
