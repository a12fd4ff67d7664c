"""Knobs of the SGLang stand-in: defaults, then the config file, then environment.

Config file: JSON object at $SGLANG_STANDIN_CONFIG (default
/etc/sglang-standin/config.json; missing file = defaults). Every key can also be set
by the environment variable SGLANG_STANDIN_<KEY in upper case>, which wins.
"""
import json
import os
from dataclasses import dataclass, fields, replace

CONFIG_ENV = "SGLANG_STANDIN_CONFIG"
DEFAULT_CONFIG = "/etc/sglang-standin/config.json"

# Phase keys that `time_scale` multiplies.
PHASE_KEYS = ("init_s", "weight_load_s", "post_load_s", "kv_cache_s", "jit_s",
              "cuda_graph_s", "http_start_s", "warmup_s", "node_lost_s", "weight_cache_attach_s")


@dataclass(frozen=True)
class Settings:
    log_family: str = "0.5.23"          # "0.5.23" or "0.5.16" log strings
    state_dir: str = "/run/sglang-standin"
    faults_file: str = "/etc/sglang-standin/faults.json"
    weight_cache_faults_file: str = "/etc/sglang-standin/weight-cache-faults.json"
    # GPUs the nvidia-smi stand-in reports
    gpus: int = 8
    gpu_mem_mib: int = 97887
    gpu_name: str = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    gpu_idle_mem_mib: int = 4
    gpu_idle_power_w: float = 74.0
    gpu_power_limit_w: float = 600.0
    driver_version: str = "580.95.05"
    cuda_version: str = "13.0"
    # Phase durations, seconds (before time_scale)
    init_s: float = 3.0
    weight_load_s: float = 10.0      # least time for all shards together
    post_load_s: float = 1.5
    kv_cache_s: float = 2.0
    jit_s: float = 0.0               # > 0: DeepGEMM JIT line + compiler processes (cold cache)
    cuda_graph_s: float = 6.0
    http_start_s: float = 1.0
    warmup_s: float = 2.0
    node_lost_s: float = 5.0         # a node's connection closed -> the server fails this much later
    weight_cache_attach_s: float = 1.0   # --weight-cache-mode client: fetch + map the daemon's weights
    # 0: the weight cache daemon of 0.5.23 (no delivery budget). N > 0: a later SGLang's, whose
    # daemon serves at most N attaches per generation (its --weight-cache-max-deliveries default;
    # 128 in those sources, small in tests) and answers --status.
    weight_cache_delivery_budget: int = 0
    time_scale: float = 1.0
    # Weight loading
    read_mib_s: float = 0.0          # storage read cap for all ranks together; 0 = uncapped
    drop_page_cache: bool = True     # fadvise DONTNEED before reading, so storage reads happen
    # Per-rank GPU memory
    ctx_mem_mib: int = 530
    weights_mem_frac: float = 0.76
    kv_mem_frac: float = 0.10
    graph_mem_mib: int = 1830
    cuda_graph_batches: int = 36
    # Busy loops (spin stalls, compiler processes): fraction of each 100 ms spent busy
    spin_duty: float = 1.0
    jit_compilers: int = 2
    health_check_timeout_s: float = 20.0
    # Each completion takes max_tokens * this before it answers (requests in flight for a while)
    decode_s_per_token: float = 0.0

    def phase_s(self, key):
        return getattr(self, key) * self.time_scale


def _coerce(kind, raw):
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        return str(raw).strip().lower() in ("1", "true", "yes", "on")
    return kind(raw)


def load(environ=None):
    environ = os.environ if environ is None else environ
    values = {}
    path = environ.get(CONFIG_ENV, DEFAULT_CONFIG)
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a JSON object")
        values.update(data)
    types = {f.name: type(f.default) for f in fields(Settings)}
    unknown = sorted(set(values) - set(types))
    if unknown:
        raise ValueError(f"{path}: unknown SGLang stand-in settings {unknown}")
    for name in types:
        env = environ.get("SGLANG_STANDIN_" + name.upper())
        if env is not None and env != "":
            values[name] = env
    # SGLang's own variable for the /health generation timeout
    if "SGLANG_HEALTH_CHECK_TIMEOUT" in environ and "SGLANG_STANDIN_HEALTH_CHECK_TIMEOUT_S" not in environ:
        values["health_check_timeout_s"] = environ["SGLANG_HEALTH_CHECK_TIMEOUT"]
    coerced = {k: _coerce(types[k], v) for k, v in values.items()}
    s = replace(Settings(), **coerced)
    if s.log_family not in ("0.5.16", "0.5.23"):
        raise ValueError(f"log_family must be 0.5.16 or 0.5.23, not {s.log_family!r}")
    return s


def to_dict(s):
    return {f.name: getattr(s, f.name) for f in fields(s)}


def from_dict(d):
    return Settings(**d)
