"""The words and number formats every part of the incident report shares."""
import time

PHASE_WORDS = {
    "starting": "process start and argument parsing",
    "distributed_init": "distributed (NCCL) initialisation",
    "weight_load": "loading the weight shards from disk",
    "post_load": "after the shards were read: repacking / post-processing weights",
    "kv_cache": "allocating the KV cache",
    "jit_compile": "JIT compilation (DeepGEMM / Triton)",
    "cuda_graph": "CUDA graph capture",
    "http_server": "starting the HTTP server",
    "warmup": "the warmup request",
    "ready": "serving",
    "preflight": "checks before the unit is stopped and started",
    "stopping": "stopping the unit and waiting for its processes and GPU memory to go",
    "unknown": "a step of the restart procedure",
}


# Reason codes the restart action reports that are not failure classes of the detector.
OTHER_CODE_TITLES = {
    "remote_step_failed": "a step of the restart failed on the host",
    "probe_error": "the probe could not observe the host",
    "unknown": "reason not recorded",
}


def fmt_duration(seconds):
    """'9m43s', '1h02m', '45s'; '?' for None."""
    if seconds is None:
        return "?"
    s = int(round(seconds))
    if s < 60:
        return "%ds" % s
    if s < 3600:
        return "%dm%02ds" % divmod(s, 60)
    h, rem = divmod(s, 3600)
    return "%dh%02dm" % (h, rem // 60)


def utc(epoch_s):
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch_s))


def fmt_t(t):
    return "t+%s" % fmt_duration(t) if t is not None else "t+?"
