"""The words and number formats every part of the incident report shares."""
import time

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.durations import fmt_duration

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
# A warm start (attached to the weight cache daemon, docs/restart-speed.md) reads no shard
# from disk in weight_load: it maps the weights the daemon holds on the GPUs.
WARM_PHASE_WORDS = {"weight_load": "attaching to the weights the weight cache daemon holds; a warm start reads no shard "
                                   "from disk"}


def phase_words(phase, restart_kind=""):
    """What the phase is, in words, for a start of restart_kind (warm | cold | ...)."""
    if restart_kind == "warm" and phase in WARM_PHASE_WORDS:
        return WARM_PHASE_WORDS[phase]
    return PHASE_WORDS.get(phase, phase)


# Reason codes the report may meet that are not failure classes (failure_classes.py).
OTHER_CODE_TITLES = {
    "unknown": "reason not recorded",
}


def observe_only_sentence(attempts):
    """Rule 4 in the report: which attempts ran observe-only and why ('' when none did)."""
    held = [a for a in attempts or () if isinstance(a, dict) and (a.get("observe_only") or {}).get("why")]
    return "".join(
        " Attempt %s ran observe-only: the same verdict had ended the starts before it, so a restart had not "
        "helped, and the detector did not stop it before its ceiling of %s (%s)." % (
            a.get("n"), fmt_duration(a["observe_only"].get("ceiling_s")), a["observe_only"]["why"]) for a in held)


def utc(epoch_s):
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch_s))


def fmt_t(t):
    return "t+%s" % fmt_duration(t) if t is not None else "t+?"
