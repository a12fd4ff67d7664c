"""The weight cache vocabulary: warm and cold restarts, why a restart must be cold, the
lines SGLang 0.5.23's weight cache daemon and its clients print, and the daemon's ready
file (sglang/srt/weight_cache/, sglang-facts.md "Weight cache daemon").

A warm restart restarts the engine alone and re-attaches to the weights the daemon holds
on the GPUs; a cold one restarts the daemon too, so the weights come from disk again.
Pure: no I/O (host/weight_cache_state.py reads the ready files).
"""
import json
import re
from dataclasses import dataclass

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import failure_classes
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.sglang_dialect import flag_value

RESTART_WARM = "warm"
RESTART_COLD = "cold"
# A start meant to be warm whose engine fell back to a disk load: recorded as cold.
RESTART_COLD_FALLBACK = "cold_fallback"
RESTART_KINDS = (RESTART_WARM, RESTART_COLD, RESTART_COLD_FALLBACK)

# The reasons `cold_reason` gives, and the upgrade's own (upgrade.yml restarts both units).
REASON_DAEMON_NOT_HEALTHY = "daemon_not_healthy"
REASON_IMPLICATES_WEIGHTS = "implicates_weights"   # "implicates_weights: <class>"
REASON_WARM_START_FAILED = "warm_start_failed"
REASON_FALLBACK_TO_DISK = "fallback_to_disk"
REASON_UPGRADE = "upgrade"
# The engine became ready without saying it attached (no client-mode line): not warm.
REASON_NOT_ATTACHED = "not_attached"
# The restart was told to be cold (the option cold, sglang_restart_cold).
REASON_REQUESTED = "requested"
# Why a warm restart is warm.
REASON_DAEMON_HEALTHY = "daemon_healthy"
# A later SGLang's delivery budget (below): the daemon answered budget_exhausted, or its
# --status says none is left ("budget_exhausted: ..."); fewer left than the restart's
# weight_cache_min_deliveries ("delivery_budget_low: ..."). Both cure with a cold restart.
REASON_BUDGET_EXHAUSTED = "budget_exhausted"
REASON_BUDGET_LOW = "delivery_budget_low"
# The daemon's unit and its start records are the engine's names with this suffix.
DAEMON_UNIT_SUFFIX = "-weights"

# The supervisor settings' `serves`: what the supervised unit runs.
SERVES_ENGINE = "engine"
SERVES_WEIGHT_CACHE = "weight_cache"
SERVES = (SERVES_ENGINE, SERVES_WEIGHT_CACHE)


def cold_reason(failure_class, daemon_healthy, warm_start_failed_before, fallback_seen, budget=None,
                min_deliveries=0):
    """Why the next restart must be cold, or None when a warm one is fine.

    failure_class: the reason code the last start ended with (None: none known);
    daemon_healthy: the daemon unit is active and every GPU's ready file names a live pid;
    warm_start_failed_before: a warm start of this run already failed or stalled;
    fallback_seen: the engine logged the fallback to a disk load (CLIENT_FALLBACK);
    budget: the daemon's DeliveryBudget (None: SGLang has none, or it could not be read);
    min_deliveries: below this many deliveries left the restart is cold (budget_reason).
    An exhausted budget is named before the failure it caused (an engine answered
    budget_exhausted fails its start): it is the cause, and no disk fallback or mismatch."""
    if not daemon_healthy:
        return REASON_DAEMON_NOT_HEALTHY
    low = budget_reason(budget, min_deliveries)
    if low and low.startswith(REASON_BUDGET_EXHAUSTED):
        return low
    if failure_class and failure_classes.implicates_weights(failure_class):
        return "%s: %s" % (REASON_IMPLICATES_WEIGHTS, failure_class)
    if warm_start_failed_before:
        return REASON_WARM_START_FAILED
    if fallback_seen:
        return REASON_FALLBACK_TO_DISK
    return low


# ---- the delivery budget (later SGLang sources; 0.5.23 has none) ------------------------------
# Each daemon generation serves a bounded number of attaches (--weight-cache-max-deliveries,
# 128 by default), never refunded; then it answers budget_exhausted, and only a daemon restart
# (a cold restart) gives a new budget. `python -m sglang.srt.weight_cache.daemon --status
# --model-path P --gpu-id G` reports it without loading weights (sglang-facts.md).
DAEMON_MODULE = "sglang.srt.weight_cache.daemon"
# The restart's weight_cache_min_deliveries: fewer left than this and the next restart is cold,
# rotating the daemon before it refuses an engine (a few unattended engine restarts fit in).
DEFAULT_MIN_DELIVERIES = 8
STATUS_FLAG = "--status"
# An engine refused by an exhausted daemon: "[IpcModelLoader] ... answered budget_exhausted: ..."
CLIENT_BUDGET_EXHAUSTED = re.compile(r"\[IpcModelLoader\][^\n]*\bbudget_exhausted\b")
# A daemon without --status (SGLang 0.5.23) refuses the flag as argparse does.
_NO_STATUS_FLAG = re.compile(r"unrecognized arguments:.*--status")


@dataclass(frozen=True)
class DeliveryBudget:
    """The budget of the daemons of one engine: the fewest deliveries any GPU's daemon has left
    (an engine start takes one from each)."""
    max_deliveries: int
    reserved: int
    remaining: int
    gpus: int

    def words(self):
        return "%d of %d deliveries left" % (self.remaining, self.max_deliveries)

    def to_dict(self):
        return {"max_deliveries": self.max_deliveries, "reserved": self.reserved, "remaining": self.remaining,
                "gpus": self.gpus}


def budget_reason(budget, min_deliveries):
    """budget_exhausted (none left) or delivery_budget_low (fewer than min_deliveries left),
    with the numbers, or None (no budget known, or enough left)."""
    if budget is None:
        return None
    if budget.remaining <= 0:
        return "%s: %s, the daemon answers no more attaches until it restarts" % (
            REASON_BUDGET_EXHAUSTED, budget.words())
    if budget.remaining < min_deliveries:
        return "%s: %s, below weight_cache_min_deliveries=%d" % (REASON_BUDGET_LOW, budget.words(), min_deliveries)
    return None


def daemon_launcher(cmdlines):
    """The daemon launcher's argv among processes' argvs: `python -m sglang.srt.weight_cache.daemon ...`
    (a single daemon started with --gpu-id counts too); None when none runs."""
    for argv in cmdlines:
        if len(argv) > 2 and argv[1:3] == ["-m", DAEMON_MODULE] and STATUS_FLAG not in argv:
            return list(argv)
    return None


def status_commands(launcher_argv):
    """The --status command of each local GPU's daemon, from the launcher's argv (its python,
    --model-path and the GPUs it starts daemons on, as the launcher computes them).
    ValueError for an argv it cannot read."""
    argv = list(launcher_argv or ())
    if not daemon_launcher([argv]):
        raise ValueError("not a weight cache daemon command line: %r" % argv[:3])
    model_path = flag_value(argv, "--model-path", None)
    if not model_path:
        raise ValueError("the weight cache daemon's command line has no --model-path")
    try:
        single = flag_value(argv, "--gpu-id", None)
        if single is not None:
            gpus = [int(single)]
        else:
            tp, nnodes = int(flag_value(argv, "--tp-size", "1")), int(flag_value(argv, "--nnodes", "1"))
            base, step = int(flag_value(argv, "--base-gpu-id", "0")), int(flag_value(argv, "--gpu-id-step", "1"))
            gpus = [base + r * step for r in range(max(1, tp // max(1, nnodes)))]
    except ValueError as exc:
        raise ValueError("the weight cache daemon's GPU flags are not numbers: %r" % argv) from exc
    return [[argv[0], "-m", DAEMON_MODULE, STATUS_FLAG, "--model-path", model_path, "--gpu-id", str(g)]
            for g in gpus]


def parse_budget_status(rc, out, err, gpus):
    """(DeliveryBudget or None, problem) from the --status answers of `gpus` daemons (one JSON
    line each; rc is the shell's, which ran them side by side). (None, '') when the installed
    SGLang has no budget (it refuses --status); (None, why) when it could not be read."""
    answers = {}
    for line in (out or "").splitlines():
        try:
            answer = json.loads(line)
        except ValueError:
            continue
        if isinstance(answer, dict) and "remaining" in answer:
            answers[answer.get("gpu_id")] = answer
    if not answers and _NO_STATUS_FLAG.search(err or ""):
        return None, ""
    if len(answers) < gpus:
        why = (err or out or "").strip().splitlines()
        return None, "%d of %d weight cache daemons answered --status (rc %s)%s" % (
            len(answers), gpus, rc, ": " + why[-1][-300:] if why else "")
    try:
        fewest = min(answers.values(), key=lambda a: int(a["remaining"]))
        return DeliveryBudget(int(fewest["max_deliveries"]), int(fewest["reserved"]), int(fewest["remaining"]),
                              len(answers)), ""
    except (KeyError, TypeError, ValueError) as exc:
        return None, "unreadable --status answer: %s" % exc


# ---- which weights the daemon can hold ----------------------------------------------------
# SGLang 0.5.23's IPC_QUANT_ALLOWLIST (sglang/srt/weight_cache/protocol.py in its wheel): the
# quantization methods its daemon and client share over CUDA IPC, each with the
# quantization_config field that must be set (None: nothing more). Any other method raises
# UnsupportedQuantForIPCError in both before a weight is loaded. Used only when the venv's
# SGLang cannot be asked (its is_ipc_quant_supported).
PINNED_SGLANG_VERSION = "0.5.23"
PINNED_IPC_QUANT_ALLOWLIST = {"": None, "fp8": "weight_block_size"}
QUANTIZATION_FLAG = "--quantization"


def method_words(method):
    """A quantization method as an operator reads it."""
    return repr(method) if method else "none (unquantized)"


def accepted_words(allowlist):
    """What an allowlist accepts, e.g. "none (unquantized), 'fp8' (with weight_block_size set)"."""
    return ", ".join(method_words(m) + (" (with %s set)" % allowlist[m] if allowlist.get(m) else "")
                     for m in allowlist)


def quant_method_of(server_flags, model_config):
    """(method, quant_config, where it came from) as SGLang resolves the method: a
    --quantization flag wins, else config.json's quantization_config.quant_method.
    server_flags: the flat list of flags; model_config: config.json's dict (None: unread)."""
    quant_config = (model_config or {}).get("quantization_config")
    flags = [str(f) for f in server_flags or ()]
    for i, flag in enumerate(flags):
        name, sep, value = flag.partition("=")
        if name == QUANTIZATION_FLAG:
            value = value if sep else (flags[i + 1] if i + 1 < len(flags) else "")
            if value:
                return value, quant_config, QUANTIZATION_FLAG
    if isinstance(quant_config, dict) and quant_config.get("quant_method"):
        return str(quant_config["quant_method"]), quant_config, "config.json quantization_config.quant_method"
    return "", quant_config, "config.json (no quantization_config)"


def pinned_ipc_quant_supported(method, quant_config):
    """PINNED_IPC_QUANT_ALLOWLIST's verdict on one method and its quantization_config."""
    if method not in PINNED_IPC_QUANT_ALLOWLIST:
        return False
    needed = PINNED_IPC_QUANT_ALLOWLIST[method]
    return needed is None or (isinstance(quant_config, dict) and quant_config.get(needed) is not None)


# ---- the daemon's lines (sglang/srt/weight_cache/daemon.py) -------------------------------
# "[WeightCacheDaemon gpu=0 tp_rank=0] Loading model from disk: /models/Kimi-K2.6"
DAEMON_LOADING = re.compile(r"\[WeightCacheDaemon gpu=(?P<gpu>\d+)[^\]]*\] Loading model from disk: (?P<path>\S+)")
# "[WeightCacheDaemon gpu=0 tp_rank=0] Model loaded from disk in 512.34s"
DAEMON_LOADED = re.compile(r"\[WeightCacheDaemon gpu=(?P<gpu>\d+)[^\]]*\] Model loaded from disk in (?P<seconds>\d+(?:\.\d+)?)s")
# "... Exported 1234 tensors as IPC handles." (per rank) and "... Exported 1234 tensors (5
# non-persistent buffers), transport=..., metadata size ~1.2 MB" (per daemon)
DAEMON_EXPORTED = re.compile(r"\[WeightCacheDaemon gpu=(?P<gpu>\d+)[^\]]*\] Exported (?P<tensors>\d+) tensors")
# "[WeightCacheDaemon gpu=0] Listening on /run/sglang-k26-ddtree-weights/sglang_weight_cache_<uuid>.sock"
DAEMON_LISTENING = re.compile(r"\[WeightCacheDaemon gpu=(?P<gpu>\d+)\] Listening on (?P<socket>\S+)")
# "All 8 weight cache daemons on node 0 are ready (pp_ranks=0..0, tp_ranks=0..7, ...)"
DAEMONS_READY = re.compile(r"All (?P<count>\d+) weight cache daemons on node (?P<node>\d+) are ready")
# "[WeightCacheDaemon gpu=0] Received signal 15, shutting down", "... Shutdown complete",
# and the launcher's "All weight cache daemons have been terminated"
DAEMON_SHUTDOWN = re.compile(r"\[WeightCacheDaemon gpu=(?P<gpu>\d+)\] (?:Received signal \d+, shutting down|Shutdown complete)|"
                             r"All weight cache daemons have been terminated")

# ---- the engine's lines in client mode (sglang/srt/weight_cache/ipc_loader.py) --------------
# "[IpcModelLoader] Requesting weights from daemon at SOCK with config: model=..., ..."
CLIENT_REQUESTING = re.compile(r"\[IpcModelLoader\] Requesting weights from daemon at (?P<socket>\S+)")
# "[IpcModelLoader] Loaded model via IPC (mode=client), total=3.21s": attached to the cache
CLIENT_ATTACHED = re.compile(r"\[IpcModelLoader\] Loaded model via IPC \(mode=(?P<mode>\w+)\)")
# No daemon, or one holding another configuration: a silent cold load from disk follows.
CLIENT_FALLBACK = re.compile(r"\[IpcModelLoader\] Weight cache not available or config mismatch, falling back to disk load")
# Critical: the daemon died under an engine that maps its weights; the engine SIGKILLs itself.
CLIENT_DAEMON_DIED = re.compile(r"\[IpcModelLoader\] Weight cache daemon \(pid=(?P<pid>\d+)\) died while this engine holds its weights")

# The phase each daemon or client line marks (log_lines.PHASE_MARKERS carries them).
PHASE_MARKERS = (
    (DAEMON_LOADING, "weight_load"),
    (CLIENT_REQUESTING, "weight_load"),
    (DAEMON_LOADED, "post_load"),
    (DAEMON_EXPORTED, "post_load"),
    (CLIENT_ATTACHED, "post_load"),
)


def attach_outcome(text):
    """RESTART_WARM for the engine's attached line, RESTART_COLD_FALLBACK for its fallback
    line, else None."""
    if CLIENT_ATTACHED.search(text or ""):
        return RESTART_WARM
    if CLIENT_FALLBACK.search(text or ""):
        return RESTART_COLD_FALLBACK
    return None


def daemon_unit(unit):
    """The weight cache daemon's unit of an engine unit: `<unit>-weights.service`."""
    base = unit[:-len(".service")] if unit.endswith(".service") else unit
    return base + DAEMON_UNIT_SUFFIX + ".service"


# ---- the ready file ---------------------------------------------------------------------------
DEVICE_UUID_FIELD = "{device_uuid}"


def device_uuid(nvidia_smi_uuid):
    """The UUID the daemon keys its files by (str(torch...uuid)): nvidia-smi's without `GPU-`."""
    return (nvidia_smi_uuid or "").strip().removeprefix("GPU-")


def ready_path(ready_template, nvidia_smi_uuid):
    """The ready file of one GPU; ValueError for a template without {device_uuid} (SGLang
    refuses it too: every GPU would share one file)."""
    if DEVICE_UUID_FIELD not in (ready_template or ""):
        raise ValueError("weight cache ready template %r must contain %s" % (ready_template, DEVICE_UUID_FIELD))
    return ready_template.replace(DEVICE_UUID_FIELD, device_uuid(nvidia_smi_uuid))


@dataclass(frozen=True)
class ReadyFile:
    pid: object      # int, or None when the file names no readable pid
    config: str      # the daemon's config as written (a dict's repr), '' when absent


def parse_ready_file(text):
    """The daemon's ready file ("pid=N\\nconfig={...}\\n") as a ReadyFile."""
    pid, config = None, ""
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        if key == "pid" and pid is None:
            try:
                pid = int(value.strip())
            except ValueError:
                pid = None
        elif key == "config" and not config:
            config = value.strip()
    if pid is not None and pid <= 0:
        pid = None
    return ReadyFile(pid, config)


class StartKind:
    """Whether one engine start attached to the weight cache: what it was launched expecting
    (warm when the daemon was healthy), then what the engine's lines say. Pure."""

    def __init__(self, daemon_healthy):
        self.kind = RESTART_WARM if daemon_healthy else RESTART_COLD
        self.reason = None if daemon_healthy else REASON_DAEMON_NOT_HEALTHY
        self.attached = False

    def on_line(self, text):
        """True when the line settled or changed the kind."""
        outcome = attach_outcome(text)
        if outcome == RESTART_WARM and not self.attached and self.kind != RESTART_COLD_FALLBACK:
            self.attached = True
            self.kind, self.reason = RESTART_WARM, None
            return True
        if outcome == RESTART_COLD_FALLBACK and self.kind != RESTART_COLD_FALLBACK:
            self.kind, self.reason = RESTART_COLD_FALLBACK, REASON_FALLBACK_TO_DISK
            return True
        if not self.attached and self.reason != REASON_BUDGET_EXHAUSTED and CLIENT_BUDGET_EXHAUSTED.search(text or ""):
            # Refused by the daemon: no fallback to disk and no config mismatch; the start fails.
            self.reason = REASON_BUDGET_EXHAUSTED
            return True
        return False

    @property
    def warm(self):
        return self.kind == RESTART_WARM

    def words(self):
        """The progress line's word: "warm" or "cold" (a fallback is a cold start)."""
        return RESTART_WARM if self.warm else RESTART_COLD

    def to_record(self):
        return {"restart_kind": self.kind, "restart_kind_reason": self.reason}
