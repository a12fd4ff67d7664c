"""The words and number formats every part of the incident report shares."""
import time

from ansible_collections.sglang_ops.serving.plugins.module_utils.durations import fmt_duration

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


# Reason codes the report may meet that are not failure classes (failure_classes.py).
OTHER_CODE_TITLES = {
    "unknown": "reason not recorded",
}


def utc(epoch_s):
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch_s))


def fmt_t(t):
    return "t+%s" % fmt_duration(t) if t is not None else "t+?"
