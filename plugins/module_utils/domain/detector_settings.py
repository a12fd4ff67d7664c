"""Every threshold and window of the stall detector, in one frozen dataclass.

Units are in the names. Overrides (a dict) become settings in one place, from_overrides(), whoever gives them:
the restart action (its detector and supervisor_detector options), the unit supervisor's
settings file, a trace header's recorded settings and `sglang-ops replay --set`
(tests/unit/test_layout.py keeps it so); docs/detector.md explains each field.
Every override is range-checked by the unit its name ends with (RANGES), so a field
added later is covered by naming its unit.
"""
from dataclasses import dataclass, fields, replace

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.number_range import range_problem

_KERNEL_PHASES = ("jit_compile", "cuda_graph", "warmup")
# How long each phase usually takes where the host has no history of it (seconds): the
# longest a healthy start is expected to sit in one wait of that phase. Graph capture's
# bar moves batch by batch (2 min in one synchronize was recorded on an H100); after
# loading and after the KV cache, GPU-bound autotune and repacking may sit in one
# synchronize for 35 min (MoE tuning).
_USUAL_PHASE_S = ("starting=60", "distributed_init=120", "weight_load=300", "post_load=1200", "kv_cache=1200",
                  "jit_compile=1200", "cuda_graph=120", "http_server=120", "warmup=600")


@dataclass(frozen=True)
class DetectorSettings:
    # Noise floors: movement below these is not progress.
    gpu_mem_noise_mib: int = 64
    io_noise_bytes_per_s: int = 16384
    # CPU of the unit's cgroup, percent of one core, summed over its processes.
    cpu_idle_pct: float = 50.0
    # Rule 2: the start's CPU floor, learned from its quietest stretch (life_signs.CpuFloor):
    # at most cpu_floor_max_per_process_pct per process; a rate within cpu_floor_margin_pct of
    # it, with every GPU read and idle, is a start at its floor (frozen), not one at work.
    cpu_floor_max_per_process_pct: float = 15.0
    cpu_floor_margin_pct: float = 50.0
    # GPU utilisation: at or above spin_util_pct a GPU with flat memory is spinning;
    # below idle_util_pct on every GPU the GPUs are idle.
    spin_util_pct: float = 90.0
    spin_min_gpus: int = 1
    # A GPU at spin utilisation drawing this much more power than the lowest seen on an idle
    # GPU (percent of that) runs compute kernels; a spin-wait draws about idle power.
    gpu_compute_power_above_idle_pct: float = 75.0
    # The power level of a spin-wait: a GPU at spin utilisation is spinning only while it
    # draws at most gpu_spin_power_max_limit_pct of its power.limit (`power_limit_w`); a
    # board that does not say its limit: at most gpu_spin_power_max_w (no board spins above
    # it), else the learned idle power above. More is compute (matmuls draw 60-100 %).
    gpu_spin_power_max_limit_pct: float = 30.0
    gpu_spin_power_max_w: float = 250.0
    idle_util_pct: float = 10.0
    # Windows, measured from the moment the signature appeared (with no progress since).
    stall_spin_window_s: float = 300.0
    # A spin whose GPUs draw about idle power (a spin-wait, confirmed by the power reading).
    stall_spin_idle_power_window_s: float = 180.0
    stall_spin_kernel_phase_window_s: float = 1200.0
    kernel_phases: tuple = _KERNEL_PHASES
    stall_idle_window_s: float = 480.0
    # Fallbacks without a waiting signature, measured from the last progress.
    stall_no_progress_s: float = 1500.0
    stall_busy_no_progress_s: float = 5400.0
    # py-spy: ask after this long without progress, sample every stacks_interval_s,
    # and trust two identical samples at least stacks_min_gap_s apart.
    stacks_after_quiet_s: float = 20.0
    stacks_interval_s: float = 60.0
    stacks_min_gap_s: float = 50.0
    stack_wait_depth: int = 1
    # Without a GPU reading, stacks settle a stall only when some rank has a collective or
    # host wait (not a device synchronize) among this many innermost frames.
    stack_collective_depth: int = 3
    # With GPU readings, stacks settle a stall only after this many readings in a row, all
    # flat (short kernels show as bursts within a few polls; a lost reading may hide one).
    stacks_gpu_flat_polls: int = 3
    # A lethal line fails the start once the process is gone, or once this long has passed
    # after it with no ordinary log line after it (SGLang's launcher kills the tree within a
    # second of a rank's exception); a line followed by ordinary lines later than this was survived.
    fatal_confirm_s: float = 1.0
    # The process going this soon after a survivable line (a watchdog dump) names that line.
    fatal_death_window_s: float = 60.0
    # Rule 1: a lethal-looking line is confirmed by the process exiting, or by the start
    # freezing after it (a stall signature in the polls after it, held at least
    # line_freeze_min_s), within line_confirm_window_s of the line; a sign of life after it,
    # or no confirmation in that window, means it was survived.
    line_confirm_window_s: float = 60.0
    line_freeze_min_s: float = 10.0
    # A sticky line (sticky_lines.py: CUDA sticky errors, a strict state_dict mismatch, NCCL
    # errors, a port that cannot be bound, SGLang's own fatal lines) is confirmed by this long
    # without progress after the poll that brought it, whatever the CPU or GPU utilisation,
    # or by the minute after it running out without progress.
    line_sticky_quiet_s: float = 15.0
    # Without a GPU reading, a busy CPU whose rate rose by more than this (percent of the
    # previous interval's rate) is work; a steady or falling rate may be ranks busy-polling
    # a collective while the rank that raised has stopped.
    cpu_pinned_change_pct: float = 35.0
    # Rule 2: a GPU reading at or above gpu_burst_util_pct and gpu_burst_margin_pct above its
    # own recent noise ceiling is a burst of kernels (0, 2 %, 0, 18 %: work, not a hang).
    gpu_burst_util_pct: float = 2.0
    gpu_burst_margin_pct: float = 3.0
    # Rule 2: an interval whose CPU rate is at least cpu_burst_min_pct, with the unit's recent
    # floor at most cpu_burst_floor_share_pct of it, is a burst of work. Rule 3:
    # identical stacks with idle GPUs are parked only after stall_parked_quiet_s without a
    # CPU or GPU burst (longer than a tuning loop's 30-60 s between configs).
    cpu_burst_min_pct: float = 5.0
    cpu_burst_floor_share_pct: float = 33.0
    stall_parked_quiet_s: float = 120.0
    # Rule 5: the unit's CPU time not moving beyond a trickle (at most frozen_cpu_pct of one
    # core per process: background threads of a hung process) for stall_frozen_window_s, with
    # no GPU at work and nothing else moving, is a frozen start, with or without GPU telemetry.
    frozen_cpu_pct: float = 1.0
    stall_frozen_window_s: float = 120.0
    # Every process of the unit stopped (state T) this long: nothing can move.
    stall_stopped_window_s: float = 60.0
    # CPU idle and nothing moving while no GPU reading says whether the GPUs work (a GPU-bound
    # loop with blocking synchronisation looks the same from the host).
    stall_idle_blind_window_s: float = 960.0
    # nvidia-smi timing out on every poll this long while the unit runs (a hung collective
    # can wedge the driver) with nothing else moving.
    stall_gpu_unanswered_window_s: float = 300.0
    # Rule 5, blind on power (no GPU reading, or GPUs at spin utilisation with no power
    # reading): identical stacks of every rank in one wait (a collective or a synchronize)
    # for blind_wait_usual_x times what the phase usually takes (the host's history,
    # blind_wait_history_s, else blind_wait_usual_s), and at least blind_wait_min_s, is a stall.
    blind_wait_usual_s: tuple = _USUAL_PHASE_S
    blind_wait_history_s: tuple = ()
    blind_wait_usual_x: float = 2.0
    blind_wait_min_s: float = 120.0
    # A waiting signature held this long turns "quiet" into "suspect".
    suspect_after_s: float = 30.0
    # A log message (numbers aside) seen in this many earlier polls is a heartbeat.
    heartbeat_repeat_polls: int = 3
    # A missing signal older than this is treated as unknown, not as its last value.
    signal_stale_s: float = 60.0
    # A GPU holder SGLang did not name as a rank that left the unit is a death once the start
    # stays frozen this long after it (child_deaths.py; a rank's leaving is a death at once).
    child_freeze_min_s: float = 20.0
    # A server over several nodes whose ranks wait at the rendezvous past their --dist-timeout
    # (peer_wait.py) is called `peer_missing` this long after it (torch's own error and the
    # ranks' exit come first when they come).
    peer_timeout_grace_s: float = 30.0
    # Ready is a successful completion. Unless this is True, a 200 from /health after the
    # "ready to roll" line also counts (SGLang's /health runs a one-token generation),
    # provided no completion was tried and failed in that poll.
    ready_requires_completion: bool = False

    def with_overrides(self, overrides):
        """A copy with `overrides` applied; ValueError names unknown keys or wrong types."""
        if not overrides:
            return self
        if not isinstance(overrides, dict):
            raise ValueError("detector settings overrides must be a mapping, got %s" % type(overrides).__name__)
        known = {f.name: f for f in fields(self)}
        unknown = sorted(k for k in overrides if k not in known)
        if unknown:
            raise ValueError("unknown detector setting(s): %s (known: %s)" % (", ".join(map(str, unknown)), ", ".join(sorted(known))))
        changes = {}
        for key, value in overrides.items():
            changes[key] = check_range(key, _coerce(key, getattr(self, key), value))
        return replace(self, **changes)

    def range_problems(self):
        """Every field outside its unit's range, in words (empty when all are fine)."""
        problems = []
        for f in fields(self):
            try:
                check_range(f.name, getattr(self, f.name))
            except ValueError as exc:
                problems.append(str(exc))
        return problems

    def to_dict(self):
        return {f.name: (list(v) if isinstance(v, tuple) else v) for f in fields(self) for v in [getattr(self, f.name)]}


# (name suffix, lowest, highest, lowest allowed itself): the first suffix that matches wins.
# Windows and intervals are seconds > 0 and at most a day (a start watched longer than
# that is start_timeout_s's business); rates and sizes are >= 0; counts are >= 1.
DAY_S = 86400.0
RANGES = (
    ("_bytes_per_s", 0, 1e12, True),
    ("_s", 0, DAY_S, False),
    ("_pct", 0, 100, True),
    ("_mib", 0, 16 * 2**20, True),
    ("_gpus", 1, 1024, True),
    ("_polls", 1, 10000, True),
    ("_depth", 1, 1000, True),
    ("_w", 0, 100000, True),
    ("_x", 1, 1000, True),
)


def from_overrides(overrides, base=None):
    """`base` (default: the defaults) with `overrides` applied, each type- and range-checked;
    ValueError names an unknown setting or what is wrong with a value."""
    return (base if base is not None else DetectorSettings()).with_overrides(overrides)


def check_range(key, value):
    """value, or ValueError naming the setting and its allowed range."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, tuple) and not all(value):
            raise ValueError("detector setting %s must not hold an empty name" % key)
        if isinstance(value, tuple) and key.endswith("_s"):
            phase_seconds(value, key)
        return value
    for suffix, low, high, low_ok in RANGES:
        if key.endswith(suffix):
            break
    else:
        low, high, low_ok = 0, 1e12, True  # a number without a known unit: not negative
    problem = range_problem("detector setting " + key, value, low, high, low_ok)
    if problem:
        raise ValueError(problem)
    return value


def phase_seconds(entries, key="blind_wait_usual_s"):
    """{phase: seconds} of a setting written as PHASE=SECONDS entries; ValueError naming the
    setting for an entry that is not one."""
    out = {}
    for entry in entries:
        phase, sep, seconds = str(entry).partition("=")
        try:
            value = float(seconds)
        except ValueError:
            value = None
        if not sep or not phase.strip() or value is None:
            raise ValueError("detector setting %s expects PHASE=SECONDS entries, got %r" % (key, entry))
        problem = range_problem("detector setting %s (%s)" % (key, phase.strip()), value, 0, DAY_S, False)
        if problem:
            raise ValueError(problem)
        out[phase.strip()] = value
    return out


def _coerce(key, default, value):
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1")
    elif isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
    elif isinstance(default, float):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    elif isinstance(default, tuple):
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return tuple(value)
    raise ValueError("detector setting %s expects %s, got %r" % (key, _type_name(default), value))


def _type_name(default):
    if isinstance(default, bool):
        return "a boolean"
    if isinstance(default, int):
        return "an integer"
    if isinstance(default, float):
        return "a number"
    return "a list of names"
