"""What one SGLang journal record means: rank, phase marker, fatal class, heartbeat.

Covers both log-string families (<= 0.5.16 and 0.5.23, sglang-facts.md) and the
systemd lines journald adds for the unit. Pure functions over strings.

A line is `lethal` only when it is something SGLang dies of: an exception raised in a
rank (a traceback, `SomethingError: ...`) or a known fatal class. A lethal line is
`sticky` when the libraries say no process survives it (sticky_lines.py), else soft.
Lines SGLang survives
are `survivable` evidence, never a verdict alone: watchdog dumps (the soft watchdog
logs and carries on; the hard one kills the tree itself, so its death is what counts),
and warnings, retries and fallbacks, however often they say "error" or "timeout".
"""
import functools
import re
from dataclasses import dataclass, replace

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import sglang_dialect, weight_cache
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.sticky_lines import sticky_code


# (pattern, phase). First match wins; order matters only where patterns overlap.
PHASE_MARKERS = (
    (re.compile(r"server_args=|Starting SGLang|launch_server"), "starting"),
    (re.compile(r"Init torch distributed (begin|ends)|Init parallel (begin|ends)|sglang is using nccl"), "distributed_init"),
    (re.compile(r"Load weight begin|Loading safetensors checkpoint shards|Multi-thread loading shards|Loading pt checkpoint shards"), "weight_load"),
    (re.compile(r"Load weight end"), "post_load"),
    (re.compile(r"KV Cache is allocated|Memory pool end"), "kv_cache"),
    (re.compile(r"DeepGEMM JIT|DeepGEMM warmup|Entering DeepGEMM"), "jit_compile"),
    (re.compile(r"Capture (cuda graph|.*CUDA graph) (begin|end)|Capturing batches"), "cuda_graph"),
    (re.compile(r"max_total_num_tokens=|Started server process|Waiting for application startup|Application startup complete|"
                r"Uvicorn running on"), "http_server"),
    (re.compile(r"GET /(get_)?model_info|POST /generate|Prefill batch"), "warmup"),
    (re.compile(r"The server is fired up and ready to roll"), "ready"),
) + weight_cache.PHASE_MARKERS   # the weight cache daemon's load, the engine attaching to it

# The rendezvous: every rank of every node meets in torch.distributed's init (both log families).
RENDEZVOUS = re.compile(r"Init (?:torch distributed|parallel) (begin|ends)")


def rendezvous_mark(text):
    """"begin" or "end" of a line opening or closing the ranks' rendezvous, else None."""
    m = RENDEZVOUS.search(text or "")
    return None if m is None else ("begin" if m.group(1) == "begin" else "end")


# (pattern, reason code), most specific first: the first class that matches any line
# of a poll names the failure.
FATAL_PATTERNS = (
    (weight_cache.CLIENT_DAEMON_DIED, "weight_cache_daemon_died"),
    (re.compile(r"OutOfMemoryError|CUDA out of memory|CUDA error: out of memory|Not enough memory\. Please try to increase", re.I), "fatal_oom"),
    (re.compile(r"memory capacity is unbalanced|may be occupied by other processes"), "fatal_gpu_occupied"),
    (re.compile(r"address already in use|\[Errno 98\]", re.I), "fatal_port_in_use"),
    (re.compile(r"SafetensorError|Error while deserializing header|incomplete metadata|MetadataIncompleteBuffer|HeaderTooLarge|"
                r"checkpoint .*(truncated|corrupt)", re.I), "fatal_checkpoint"),
    (re.compile(r"Unexpected error during packing|error while (re)?packing", re.I), "fatal_packing"),
    (re.compile(r"Capture (cuda graph|.*CUDA graph) failed|CUDA graph capture failed", re.I), "fatal_cuda_graph"),
    (re.compile(r"Initialization failed\. warmup error|warmup error:", re.I), "fatal_warmup"),
    (re.compile(r"NCCL error|ncclInternalError|ncclSystemError|ncclUnhandledCudaError|ncclInvalidUsage|ncclRemoteError|"
                r"Watchdog caught collective operation timeout|ProcessGroupNCCL.*timed out|DistBackendError", re.I), "fatal_nccl"),
    (re.compile(r"hit an exception|Received sigquit from a child process|Child process unexpectedly failed|crashed with exit code|"
                r"Rank \d+ scheduler is dead|Exception in (thread|process) .*(Scheduler|Detokenizer)", re.I), "fatal_error"),
)

# Lines printed while waiting, healthy or hung: never progress, never proof of a hang.
HEARTBEAT_PATTERNS = (
    re.compile(r"No available shared memory broadcast block found", re.I),
    re.compile(r"\bstill waiting\b|\bheartbeat\b|waiting for .* to (finish|complete|join)", re.I),
    re.compile(r"soft watchdog", re.I),
)

# SGLang's watchdogs (utils/watchdog.py): "<name> watchdog timeout (self.watchdog_timeout=.., self.soft=..)",
# older "Watchdog timeout (...)", "soft watchdog ..." wordings. The soft one only dumps and carries on;
# the hard one (it says soft=False) sends SIGQUIT to the launcher 5 s later. A watchdog line that does
# not say it is the hard one is evidence: the process going is the proof.
WATCHDOG = re.compile(r"watchdog timeout|soft watchdog|watchdog (fired|triggered)", re.I)
HARD_WATCHDOG = re.compile(r"self\.soft=False")
SOFT_WATCHDOG = re.compile(r"self\.soft=True|soft watchdog", re.I)
# Lines SGLang and its libraries print and carry on after, whatever words they contain.
SURVIVABLE = re.compile(r"\bwarn(ing)?s?\b|Warning:|^\[W\d{3,4}|^[WI]\d{4} \d|--- Logging error ---|\bretry(ing)?\b|\bretries\b|fall(ing)? ?back|"
                        r"\btry(ing)? (another|the next|port)\b|NCCL INFO|"
                        r"will be ignored|\bignor(e|ed|ing)\b|\bskipp(ed|ing)\b|\bnot supported\b.*\busing\b|self\.soft=True", re.I)
# Python announces the tracebacks it prints and carries on after: an error in __del__ or
# at interpreter exit, a failing logging handler. The traceback that follows is survived.
ANNOUNCES_SURVIVED_TRACEBACK = re.compile(r"^Exception ignored in|^--- Logging error ---")
# Words that make a survivable line worth showing to the operator.
ALARMING = re.compile(r"error|exception|time(d)? ?out|fail|out of memory|in use", re.I)
# An exception raised in a process: a traceback header or "[module.]SomethingError: message".
EXCEPTION = re.compile(r"^(?:\[rank\d+\]:\s*)?(?:(?:ERROR|CRITICAL)\s+\S+\.py:\d+:\s*)?(?:Traceback \(most recent call last\)|"
                       r"(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception)(?::\s|:?$))")
# The rest of a traceback and the launcher's reaction: part of a failure, never progress after one.
FAILURE_CHATTER = re.compile(r"^\s*File \"|^\s{2,}\S|^\s*[\^~]+\s*$|During handling of the above exception|"
                             r"The above exception was the direct cause|^\[rank\d+\]:|Received sigquit|^Killed$|"
                             r"NCCL (WARN|INFO)|debug info:|^Thread 0x|^Process \d+:|py-spy|pyspy|"
                             # uvicorn's own teardown (uvicorn/server.py Server.shutdown, main)
                             r"Waiting for application shutdown|Application shutdown complete|Finished server process")

_NUMBERS = re.compile(r"\d+(?:\.\d+)?")


@dataclass(frozen=True)
class LogLine:
    text: str          # message without the timestamp/rank prefix
    rank: int          # TP rank, or None for lines without one
    phase: str         # phase this line marks, or None
    fatal_code: str    # failure class this line names, or None
    lethal: bool       # SGLang dies of this line (an exception from a rank, a known fatal class)
    sticky: bool       # lethal, and no process survives it (sticky_lines.py): confirmed by no progress
    survivable: str    # "soft_watchdog", "watchdog" (soft or hard unsaid) or "warning": evidence SGLang survives, or None
    chatter: bool      # part of a failure report (traceback body, launcher's reaction): not progress
    heartbeat: bool
    exit_status: str   # "1/FAILURE", "0/SUCCESS", ... from "Main process exited", else None
    unit_done: bool    # journald says the unit finished (deactivated, failed, restart scheduled)
    key: str           # the message with numbers blanked: repeats of one message share a key


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


def lethal_code(text):
    """(fatal code, lethal, survivable, sticky) of a prefix-free text: what SGLang dies of, what it
    survives, and whether the death is certain (a sticky line)."""
    if WATCHDOG.search(text):
        # only the hard watchdog, which says so, kills the tree (SIGQUIT 5 s later)
        if HARD_WATCHDOG.search(text):
            return "fatal_watchdog", True, None, True
        return "fatal_watchdog", False, "soft_watchdog" if SOFT_WATCHDOG.search(text) else "watchdog", False
    if SURVIVABLE.search(text):
        return None, False, "warning" if ALARMING.search(text) else None, False
    sticky = sticky_code(text)
    code = fatal_code_of(text) if _ANY_FATAL.search(text) else None
    if sticky is not None:
        # named by the most specific class ("error during packing: ... illegal memory access")
        return code or sticky, True, None, True
    if code is None and EXCEPTION.search(text):
        code = "fatal_error"
    return code, code is not None, None, False


def classify(msg):
    """One frame of a journal record (no `\r` inside) as a LogLine."""
    text, rank = sglang_dialect.strip_prefix(msg.strip())
    line = LogLine(text, rank, *_meaning(text))
    if msg[:2] in ("  ", "\t") and not line.chatter:
        line = replace(line, chatter=True)   # an indented line: the body of a traceback
    return line


_ANY_FATAL = re.compile("|".join("(?:%s)" % pattern.pattern for pattern, dummy_code in FATAL_PATTERNS), re.I)

# The phase a fault class proves, whatever line came before it: uvicorn binds its port
# in the HTTP server, repacking runs after the shards are read, and so on.
CLASS_PHASES = {
    "fatal_port_in_use": "http_server",
    "fatal_packing": "post_load",
    "fatal_checkpoint": "weight_load",
    "fatal_cuda_graph": "cuda_graph",
    "fatal_warmup": "warmup",
    "fatal_gpu_occupied": "distributed_init",
}


@functools.lru_cache(maxsize=4096)
def _meaning(text):
    """(phase, fatal_code, lethal, sticky, survivable, chatter, heartbeat, exit_status, unit_done, key) of
    a prefix-free text. Cached: every rank prints the same lines."""
    heartbeat = is_heartbeat(text)
    code, lethal, survivable, sticky = (None, False, None, False) if heartbeat else lethal_code(text)
    chatter = bool(code or survivable or FAILURE_CHATTER.search(text))
    return (phase_of(text), code, lethal, sticky, survivable, chatter, heartbeat, sglang_dialect.exit_status(text),
            bool(sglang_dialect.UNIT_DONE.search(text)), _NUMBERS.sub("#", text))


def fatal_priority(code):
    """Lower is more specific; used to name one class when several lines fail at once."""
    for i, (dummy_pattern, c) in enumerate(FATAL_PATTERNS):
        if c == code:
            return i
    return len(FATAL_PATTERNS)
