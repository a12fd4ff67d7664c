"""What one SGLang journal record means: rank, phase marker, fatal class, heartbeat.

Covers both log-string families (<= 0.5.16 and 0.5.23, sglang-facts.md) and the
systemd lines journald adds for the unit. Pure functions over strings.
"""
import functools
import re
from dataclasses import dataclass

# "[2026-05-30 20:27:00 TP3] msg", "[2026-05-30 20:27:00.123 DP0 TP3 EP3] msg"
_PREFIX = re.compile(r"^\[(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)(?P<ranks>(?:\s+[DTPE]P\d+)*)\]\s?")
_TP = re.compile(r"TP(\d+)")

# (pattern, phase). First match wins; order matters only where patterns overlap.
PHASE_MARKERS = (
    (re.compile(r"server_args=|Starting SGLang|launch_server"), "starting"),
    (re.compile(r"Init torch distributed (begin|ends)|Init parallel (begin|ends)|sglang is using nccl"), "distributed_init"),
    (re.compile(r"Load weight begin|Loading safetensors checkpoint shards|Multi-thread loading shards|Loading pt checkpoint shards"), "weight_load"),
    (re.compile(r"Load weight end|KV Cache is allocated|Memory pool end"), "kv_cache"),
    (re.compile(r"DeepGEMM JIT|DeepGEMM warmup|Entering DeepGEMM"), "jit_compile"),
    (re.compile(r"Capture (cuda graph|.*CUDA graph) (begin|end)|Capturing batches"), "cuda_graph"),
    (re.compile(r"max_total_num_tokens=|Started server process|Waiting for application startup|Application startup complete|Uvicorn running on"), "http_server"),
    (re.compile(r"GET /(get_)?model_info|POST /generate|Prefill batch"), "warmup"),
    (re.compile(r"The server is fired up and ready to roll"), "ready"),
)

# (pattern, reason code), most specific first: the first class that matches any line
# of a poll names the failure.
FATAL_PATTERNS = (
    (re.compile(r"OutOfMemoryError|CUDA out of memory|CUDA error: out of memory|Not enough memory\. Please try to increase", re.I), "fatal_oom"),
    (re.compile(r"memory capacity is unbalanced|may be occupied by other processes"), "fatal_gpu_occupied"),
    (re.compile(r"address already in use|\[Errno 98\]", re.I), "fatal_port_in_use"),
    (re.compile(r"SafetensorError|Error while deserializing header|incomplete metadata|MetadataIncompleteBuffer|HeaderTooLarge|checkpoint .*(truncated|corrupt)", re.I), "fatal_checkpoint"),
    (re.compile(r"Unexpected error during packing|error while (re)?packing", re.I), "fatal_packing"),
    (re.compile(r"Capture (cuda graph|.*CUDA graph) failed|CUDA graph capture failed", re.I), "fatal_cuda_graph"),
    (re.compile(r"Initialization failed\. warmup error|warmup error:", re.I), "fatal_warmup"),
    (re.compile(r"Scheduler watchdog timeout"), "fatal_watchdog"),
    (re.compile(r"NCCL error|ncclInternalError|ncclSystemError|ncclUnhandledCudaError|ncclInvalidUsage|ncclRemoteError|"
                r"Watchdog caught collective operation timeout|ProcessGroupNCCL.*(timed out|timeout)|DistBackendError", re.I), "fatal_nccl"),
    (re.compile(r"hit an exception|Received sigquit from a child process|Child process unexpectedly failed|"
                r"Rank \d+ scheduler is dead|Exception in (thread|process) .*(Scheduler|Detokenizer)", re.I), "fatal_error"),
)

# Lines printed while waiting, healthy or hung: never progress, never proof of a hang.
HEARTBEAT_PATTERNS = (
    re.compile(r"No available shared memory broadcast block found", re.I),
    re.compile(r"\bstill waiting\b|\bheartbeat\b|waiting for .* to (finish|complete|join)", re.I),
    re.compile(r"soft watchdog", re.I),
)

# journald's own lines about the unit.
_MAIN_EXITED = re.compile(r"Main process exited, code=(?P<code>\w+), status=(?P<status>[\w/]+)")
_UNIT_DONE = re.compile(r"\.service: (Deactivated successfully|Failed with result|Scheduled restart job)")

_NUMBERS = re.compile(r"\d+(?:\.\d+)?")


@dataclass(frozen=True)
class LogLine:
    text: str          # message without the timestamp/rank prefix
    rank: int          # TP rank, or None for lines without one
    phase: str         # phase this line marks, or None
    fatal_code: str    # failure class this line proves, or None
    heartbeat: bool
    exit_status: str   # "1/FAILURE", "0/SUCCESS", ... from "Main process exited", else None
    unit_done: bool    # journald says the unit finished (deactivated, failed, restart scheduled)
    key: str           # the message with numbers blanked: repeats of one message share a key


def strip_prefix(msg):
    """(text, rank) with the "[timestamp TPn]" prefix removed."""
    m = _PREFIX.match(msg)
    if not m:
        return msg, None
    tp = _TP.search(m.group("ranks") or "")
    return msg[m.end():], (int(tp.group(1)) if tp else None)


def phase_of(text):
    for pattern, phase in PHASE_MARKERS:
        if pattern.search(text):
            return phase
    return None


def fatal_code_of(text):
    for pattern, code in FATAL_PATTERNS:
        if pattern.search(text):
            return code
    return None


def is_heartbeat(text):
    return any(p.search(text) for p in HEARTBEAT_PATTERNS)


def classify(msg):
    """One frame of a journal record (no `\r` inside) as a LogLine."""
    text, rank = strip_prefix(msg.strip())
    return LogLine(text, rank, *_meaning(text))


_ANY_FATAL = re.compile("|".join("(?:%s)" % p.pattern for p, _ in FATAL_PATTERNS), re.I)


@functools.lru_cache(maxsize=4096)
def _meaning(text):
    """(phase, fatal_code, heartbeat, exit_status, unit_done, key) of a prefix-free text.
    Cached: every rank prints the same lines."""
    exited = _MAIN_EXITED.search(text)
    heartbeat = is_heartbeat(text)
    fatal = None if heartbeat or not _ANY_FATAL.search(text) else fatal_code_of(text)
    return (phase_of(text), fatal, heartbeat, exited.group("status") if exited else None,
            bool(_UNIT_DONE.search(text)), _NUMBERS.sub("#", text))


def fatal_priority(code):
    """Lower is more specific; used to name one class when several lines fail at once."""
    for i, (_, c) in enumerate(FATAL_PATTERNS):
        if c == code:
            return i
    return len(FATAL_PATTERNS)
