"""Injected faults of the SGLang stand-in: parsing, validation and the start counter.

Sources: the JSON in $SGLANG_STANDIN_FAULT (wins) or the file named by the
`faults_file` setting. Either holds one fault object, a list of them, or
{"faults": [...]}. A fault with "times": N is active only on the first N starts
counted for that exact fault configuration (state_dir/starts.json), one with
"from_start": N only from the Nth on.
"""
import fcntl
import hashlib
import json
import os
from dataclasses import dataclass, field

RANK_PHASES = ("distributed_init", "weight_load", "post_load", "kv_cache", "jit_compile", "cuda_graph")
MAIN_PHASES = ("http_server", "warmup")
PHASES = RANK_PHASES + MAIN_PHASES
KINDS = ("stall", "fatal", "exit", "port_in_use", "slow_disk", "long_jit", "leftover",
         "hang_after_ready", "prefill_saturation", "autotune", "tuning_loop", "benign_line")
# Behaviours of a healthy start that look alarming from outside; they run in a rank phase
# (at its first line, or after `at` items) and the start then goes on to ready.
BENIGN_KINDS = ("autotune", "tuning_loop", "benign_line")
BENIGN_DEFAULT_PHASE = {"autotune": "cuda_graph", "tuning_loop": "cuda_graph", "benign_line": "weight_load"}
MODES = ("idle", "spin")

_ALLOWED = {
    "stall": {"phase", "mode", "ranks", "at"},
    "fatal": {"phase", "line", "ranks", "at", "then", "mode", "code"},
    "exit": {"phase", "code", "line", "ranks", "at"},
    "port_in_use": set(),
    "slow_disk": {"read_mib_s"},
    "long_jit": {"seconds", "compilers"},
    "leftover": {"rank", "escape_cgroup"},
    "hang_after_ready": {"after_s", "mode"},
    "prefill_saturation": {"after_s", "seconds", "running", "queued", "prompt_tokens", "prompt_tokens_s"},
    "autotune": {"phase", "at", "ranks", "seconds", "configs", "workers"},
    "tuning_loop": {"phase", "at", "ranks", "seconds", "period_s", "burst_s"},
    "benign_line": {"phase", "at", "ranks", "line"},
}


@dataclass(frozen=True)
class Fault:
    kind: str
    phase: str = ""
    mode: str = "idle"
    ranks: tuple = ()           # empty = every rank (stall) / rank 0 (fatal, exit lines)
    at: int = 0                 # items done (shards, captured batches) before acting
    line: tuple = ()            # messages; a preset name expands to real SGLang text
    then: str = "hang"          # fatal: "hang" or "exit"
    code: int = 1
    read_mib_s: float = 0.5
    seconds: float = 60.0
    compilers: int = 0          # 0 = the jit_compilers setting
    rank: int = -1              # leftover: which TP rank survives (-1 = the last)
    escape_cgroup: bool = True
    after_s: float = 0.0
    configs: int = 6            # autotune: kernel configs that do not fit (one record each)
    workers: int = 0            # autotune: compile workers at a time (0 = the jit_compilers setting)
    period_s: tuple = (30.0, 60.0)   # tuning_loop: seconds between two GPU bursts (drawn in this range)
    burst_s: float = 2.0        # tuning_loop: how long one burst shows on nvidia-smi
    running: int = 8            # prefill_saturation: the scheduler's running requests meanwhile
    queued: int = 40            # prefill_saturation: its waiting queue (completions that arrive come on top)
    prompt_tokens: int = 32768  # prefill_saturation: the prompt of each long request
    prompt_tokens_s: float = 50000.0   # prefill_saturation: prefill rate, tokens per second
    times: int = 0              # 0 = every start
    from_start: int = 1         # active from this start on (counted as for times)
    raw: dict = field(default_factory=dict, compare=False)


def _as_list(data):
    if isinstance(data, dict) and "faults" in data:
        data = data["faults"]
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise ValueError("faults: expected an object, a list, or {\"faults\": [...]}")
    return data


def parse(data):
    faults = []
    for item in _as_list(data):
        if not isinstance(item, dict) or item.get("kind") not in KINDS:
            raise ValueError(f"fault {item!r}: kind must be one of {', '.join(KINDS)}")
        kind = item["kind"]
        extra = set(item) - _ALLOWED[kind] - {"kind", "times", "from_start"}
        if extra:
            raise ValueError(f"fault {kind}: unknown keys {sorted(extra)}")
        phase = item.get("phase", BENIGN_DEFAULT_PHASE.get(kind, ""))
        if kind in ("stall", "fatal", "exit") and phase not in PHASES:
            raise ValueError(f"fault {kind}: phase must be one of {', '.join(PHASES)}")
        if kind in BENIGN_KINDS and phase not in RANK_PHASES:
            raise ValueError(f"fault {kind}: phase must be one of {', '.join(RANK_PHASES)}")
        period = item.get("period_s", (30.0, 60.0))
        period = (period, period) if isinstance(period, (int, float)) else tuple(period)
        if kind == "tuning_loop" and (len(period) != 2 or not 0 < float(period[0]) <= float(period[1])):
            raise ValueError("fault tuning_loop: period_s must be a number or [low, high] with 0 < low <= high")
        mode = item.get("mode", "idle")
        if mode not in MODES:
            raise ValueError(f"fault {kind}: mode must be idle or spin")
        then = item.get("then", "hang")
        if then not in ("hang", "exit"):
            raise ValueError("fault fatal: then must be hang or exit")
        line = item.get("line", ())
        line = (line,) if isinstance(line, str) else tuple(line)
        if kind == "benign_line" and not line:
            line = ("inductor_oom",)
        if kind == "fatal" and not line:
            raise ValueError("fault fatal: needs a line (a preset name or text)")
        read = float(item.get("read_mib_s", 0.5))
        if kind == "slow_disk" and read <= 0:
            raise ValueError("fault slow_disk: read_mib_s must be > 0 (slow, never zero)")
        if kind == "prefill_saturation" and not (
                float(item.get("seconds", 60.0)) > 0 and int(item.get("running", 8)) >= 1
                and int(item.get("queued", 40)) >= 0 and int(item.get("prompt_tokens", 32768)) >= 1
                and float(item.get("prompt_tokens_s", 50000.0)) > 0):
            raise ValueError("fault prefill_saturation: seconds and prompt_tokens_s must be > 0, running and "
                             "prompt_tokens at least 1, queued at least 0")
        faults.append(Fault(
            kind=kind, phase=phase, mode=mode, ranks=tuple(int(r) for r in item.get("ranks", ())),
            at=int(item.get("at", 0)), line=line, then=then, code=int(item.get("code", 1)),
            read_mib_s=read, seconds=float(item.get("seconds", 60.0)),
            compilers=int(item.get("compilers", 0)), rank=int(item.get("rank", -1)),
            escape_cgroup=bool(item.get("escape_cgroup", True)),
            after_s=float(item.get("after_s", 0.0)), configs=int(item.get("configs", 6)),
            workers=int(item.get("workers", 0)), period_s=(float(period[0]), float(period[1])),
            burst_s=float(item.get("burst_s", 2.0)), running=int(item.get("running", 8)),
            queued=int(item.get("queued", 40)), prompt_tokens=int(item.get("prompt_tokens", 32768)),
            prompt_tokens_s=float(item.get("prompt_tokens_s", 50000.0)), times=int(item.get("times", 0)),
            from_start=int(item.get("from_start", 1)), raw=item))
    return faults


def _read_from(env_name, path, environ):
    """(text, origin) from the environment variable, else from the file, else ("", None)."""
    environ = os.environ if environ is None else environ
    text = environ.get(env_name, "").strip()
    if text:
        return text, env_name
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            text = f.read().strip()
        if text:
            return text, path
    return "", None


def read_source(settings, environ=None):
    """Return (text, origin) of the fault configuration, or ("", None)."""
    return _read_from("SGLANG_STANDIN_FAULT", settings.faults_file, environ)


# What the weight cache daemon plays (its own fault source, counted apart from the server's).
DAEMON_KINDS = ("stall", "fatal", "exit", "slow_disk")
DAEMON_PHASES = ("distributed_init", "weight_load", "post_load")
DAEMON_FAULT_ENV = "SGLANG_STANDIN_WEIGHT_CACHE_FAULT"


def read_daemon_source(settings, environ=None):
    """Return (text, origin) of the weight cache daemon's faults, or ("", None)."""
    return _read_from(DAEMON_FAULT_ENV, settings.weight_cache_faults_file, environ)


def parse_daemon(data):
    faults = parse(data)
    for f in faults:
        if f.kind not in DAEMON_KINDS:
            raise ValueError(f"weight cache daemon fault {f.kind}: kind must be one of {', '.join(DAEMON_KINDS)}")
        if f.kind != "slow_disk" and f.phase not in DAEMON_PHASES:
            raise ValueError(f"weight cache daemon fault {f.kind}: phase must be one of {', '.join(DAEMON_PHASES)}")
    return faults


def count_start(state_dir, text):
    """Add one start for this fault configuration; return its 1-based number."""
    key = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = os.path.join(state_dir, "starts.json")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    with os.fdopen(fd, "r+", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            counts = json.loads(f.read() or "{}")
        except ValueError:
            counts = {}
        counts[key] = int(counts.get(key, 0)) + 1
        f.seek(0)
        f.truncate()
        f.write(json.dumps(counts, sort_keys=True))
        return counts[key]


def active(faults, start_no):
    return [f for f in faults if (f.times <= 0 or start_no <= f.times) and start_no >= f.from_start]


def to_json(faults):
    return [dict(f.raw) for f in faults]
