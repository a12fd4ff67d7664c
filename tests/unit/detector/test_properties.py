"""Properties of the detector over generated starts (start_model.ModelStart).

1. A healthy start, however long its silent phases (up to 60 min each), whatever it
   prints that SGLang survives (warnings, soft-watchdog dumps, heartbeats), however its
   records are cut or ordered and whichever readings go missing, is never called
   stalled or failed, and ends ready.
2. Every fault of ../shared/fault-catalog.md (and the generic classes behind it) is
   called within its budget: a fatal line or a death within 2 polls + 1 s (score.py's),
   a stall within 5 min of its onset with py-spy samples (10 min, score.py's budget, when
   readings go missing) and 30 min + 2 polls without,
   never before its onset, and with the phase it belongs to.

Deterministic (derandomize), so CI sees the same examples every run. For a longer,
random search: `DETECTOR_PROPERTIES=stress pytest tests/unit/detector/test_properties.py`.
"""
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.sglang_ops.serving.tests.unit.detector.start_model import HEALTHY_KINDS, STALL_KINDS, new_start

settings.register_profile("detector-ci", max_examples=40, deadline=None, derandomize=True, database=None,
                          suppress_health_check=list(HealthCheck))
settings.register_profile("detector-stress", max_examples=500, deadline=None, database=None, suppress_health_check=list(HealthCheck))
SETTINGS = settings(settings.get_profile("detector-" + os.environ.get("DETECTOR_PROPERTIES", "ci")))

noise = st.fixed_dictionaries({
    "jitter": st.booleans(), "missing": st.booleans(), "cut": st.booleans(), "shuffle": st.booleans(),
    "stacks": st.booleans(), "chatter": st.booleans(),
})
shape = st.tuples(st.integers(0, 2**31), st.sampled_from([1, 2, 4, 8]), st.sampled_from([3.0, 5.0, 10.0]))
LATER_PHASES = ("kv_cache", "jit_compile", "cuda_graph")
# long phases on purpose: the silences that matter last 20-60 min
minutes = st.one_of(st.sampled_from([20 * 60, 45 * 60, 60 * 60]), st.integers(60, 3600))


def describe(s, a):
    return "t=%s %s %s phase=%s: %s" % (a.t, a.verdict, a.reason_code, a.phase, a.reason)


@SETTINGS
@given(shape=shape, noise=noise,
       phases=st.lists(st.tuples(st.sampled_from(HEALTHY_KINDS), minutes), min_size=1, max_size=3))
def test_a_healthy_start_is_never_called_stalled_or_failed(shape, noise, phases):
    seed, gpus, poll_s = shape
    s = new_start(seed, gpus, poll_s, **noise)
    s.load()
    for i, (kind, seconds) in enumerate(phases):
        if i:
            s.enter(LATER_PHASES[i - 1])
        s.healthy(kind, seconds)
    last = s.ready()
    wrong = [a for a in s.assessments if a.verdict in ("stalled", "failed")]
    assert not wrong, describe(s, wrong[0])
    assert last.verdict == "ready"


# fault class -> (line, phase it belongs to or None for "wherever it happens")
FATAL_LINES = {
    "fatal_oom": ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 5 has a total capacity of 95.59 GiB",
                  None),
    "fatal_port_in_use": ("ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30001): address already in use",
                          "http_server"),
    "fatal_gpu_occupied": ("ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes.",
                           "distributed_init"),
    "fatal_checkpoint": ("safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer", "weight_load"),
    "fatal_packing": ("Unexpected error during packing of layer model.layers.21.mlp.experts: RuntimeError: CUDA error", "post_load"),
    "fatal_cuda_graph": ("Capture cuda graph failed: invalid argument", "cuda_graph"),
    "fatal_warmup": ("Initialization failed. warmup error: Traceback (most recent call last):", "warmup"),
    "fatal_nccl": ("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 600008 ms", None),
    "fatal_watchdog": ("Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)", "warmup"),
    "fatal_error": (None, None),   # an exception the detector has no class for, or SGLang's own report of one
}
UNKNOWN_EXCEPTIONS = (
    "Traceback (most recent call last):",
    "KeyError: 'model.layers.61.mlp.experts.w13_weight_scale'",
    "AssertionError: expert count 384 is not divisible by ep size 3",
    "Scheduler hit an exception: Traceback (most recent call last):",
    "Subprocess sglang::scheduler_TP3 (pid=4242) crashed with exit code -6. Triggering SIGQUIT for cleanup...",
)
ORDER = ("distributed_init", "weight_load", "post_load", "kv_cache", "cuda_graph", "http_server", "warmup")


def _walk_to(s, phase, prefix_kind, prefix_s):
    """Enter every phase up to `phase` (a short healthy spell in the one before it)."""
    for p in ORDER[:ORDER.index(phase) + 1]:
        s.enter(p)
        if p == ORDER[max(ORDER.index(phase) - 1, 0)] and prefix_s:
            s.healthy(prefix_kind, prefix_s)


@SETTINGS
@given(shape=shape, noise=noise, code=st.sampled_from(sorted(FATAL_LINES)), unknown=st.sampled_from(UNKNOWN_EXCEPTIONS),
       anywhere=st.sampled_from(ORDER[:5]), prefix=st.tuples(st.sampled_from(HEALTHY_KINDS), st.integers(0, 900)),
       exits_after_polls=st.sampled_from([0, 1, 2, None]))
def test_a_fatal_line_fails_the_start_within_two_polls_with_its_phase(shape, noise, code, unknown, anywhere, prefix, exits_after_polls):
    seed, gpus, poll_s = shape
    s = new_start(seed, gpus, poll_s, **noise)
    line, phase = FATAL_LINES[code]
    line = line or unknown
    phase = phase or anywhere
    _walk_to(s, phase, *prefix)
    s.util = [100 if i % 2 else 0 for i in range(gpus)]     # the other ranks wait in a collective
    if exits_after_polls == 0:
        s.unit = {"active": "failed", "sub": "failed", "main_pid": None, "restarts": 0}
    a = s.step([line], cpu_pct=300)
    onset = s.records_t   # journal time of the line
    for n in range(1, 8):
        if a.final or a.t - onset > 60:
            break
        if exits_after_polls == n:
            s.unit = {"active": "failed", "sub": "failed", "main_pid": None, "restarts": 0}
        a = s.step(cpu_pct=300)
    assert a.verdict == "failed", describe(s, a)
    assert a.reason_code == code, describe(s, a)
    assert a.phase == phase, describe(s, a)
    assert onset <= a.t <= onset + max(60, 2 * poll_s + 1), describe(s, a)


@SETTINGS
@given(shape=shape, noise=noise, how=st.sampled_from(["exit0", "auto_restart", "sigkill", "watchdog_then_death"]),
       phase=st.sampled_from(ORDER), prefix=st.tuples(st.sampled_from(HEALTHY_KINDS), st.integers(0, 900)))
def test_a_death_fails_the_start_within_two_polls(shape, noise, how, phase, prefix):
    seed, gpus, poll_s = shape
    s = new_start(seed, gpus, poll_s, **noise)
    _walk_to(s, phase, *prefix)
    onset = s.t
    if how == "watchdog_then_death":
        # an older wording that does not say soft or hard: the process going is the proof
        a = s.step(["Watchdog timeout (self.watchdog_timeout=300)"], cpu_pct=100)
        assert not a.final, describe(s, a)
        onset = s.t
    if how == "exit0":
        s.unit = {"active": "inactive", "sub": "dead", "main_pid": None, "restarts": 0}
    elif how == "auto_restart":
        s.unit = {"active": "activating", "sub": "auto-restart", "main_pid": 77, "restarts": 1}
    else:
        s.comm = {}
    a = s.step(cpu_pct=0)
    lost = 0
    while not a.final and "procs" not in s.last_obs and lost < 3:
        lost += 1
        a = s.step(cpu_pct=0)   # the cgroup read of that poll was lost: the next one tells
    assert a.verdict == "failed" and a.phase == phase, describe(s, a)
    assert a.reason_code == ("fatal_watchdog" if how == "watchdog_then_death" else "process_exited"), describe(s, a)
    assert a.t - onset <= (2 + lost) * poll_s * (1.2 if noise["jitter"] else 1.0) + 1, describe(s, a)


@SETTINGS
@given(shape=shape, noise=noise, kind=st.sampled_from(STALL_KINDS), phase=st.sampled_from(ORDER[:6]),
       prefix=st.tuples(st.sampled_from(HEALTHY_KINDS), st.integers(0, 1200)), heartbeat=st.booleans())
def test_a_stall_is_called_within_its_budget_never_before_its_onset(shape, noise, kind, phase, prefix, heartbeat):
    seed, gpus, poll_s = shape
    s = new_start(seed, gpus, poll_s, **noise)
    _walk_to(s, phase, *prefix)
    s.step(["the last line before it stops"], cpu_pct=500)
    onset = s.t
    # score.py's budgets: 600 s with py-spy, 30 min + 2 polls without (parked needs a frozen CPU
    # clock, rule 3; a low CPU that still moves waits for the idle window)
    budget = 600 if noise["stacks"] else 1800 + 2 * poll_s
    a = s.stall(kind, budget + 3 * poll_s, heartbeat=heartbeat)
    assert a.verdict in ("stalled", "failed"), describe(s, a)
    assert onset <= a.t <= onset + budget, describe(s, a)
    assert a.phase == phase, describe(s, a)


@SETTINGS
@given(shape=shape, noise=noise, seconds=minutes)
def test_a_tuning_loop_with_bursts_every_30_to_60_s_and_one_stack_is_never_stopped(shape, noise, seconds):
    seed, gpus, poll_s = shape
    s = new_start(seed, gpus, poll_s, **noise)
    s.load()
    s.enter("kv_cache")
    s.healthy("tuning_sparse", seconds)
    last = s.ready()
    wrong = [a for a in s.assessments if a.verdict in ("stalled", "failed")]
    assert not wrong, describe(s, wrong[0])
    assert last.verdict == "ready"


@SETTINGS
@given(shape=shape, noise=noise, seconds=minutes, later=st.sampled_from(HEALTHY_KINDS))
def test_benign_lethal_looking_lines_that_repeat_never_stop_a_working_start(shape, noise, seconds, later):
    seed, gpus, poll_s = shape
    s = new_start(seed, gpus, poll_s, **noise)
    s.load()
    s.enter("cuda_graph")
    s.healthy("inductor_autotune", seconds)
    s.healthy(later, 300)
    last = s.ready()
    wrong = [a for a in s.assessments if a.verdict in ("stalled", "failed")]
    assert not wrong, describe(s, wrong[0])
    assert last.verdict == "ready"


@SETTINGS
@given(shape=shape, noise=noise, seconds=st.integers(60, 1200), exits_after_polls=st.sampled_from([1, 2]))
def test_a_real_oom_after_survived_autotune_records_fails_within_budget(shape, noise, seconds, exits_after_polls):
    seed, gpus, poll_s = shape
    s = new_start(seed, gpus, poll_s, **noise)
    s.load()
    s.enter("cuda_graph")
    s.healthy("inductor_autotune", seconds)
    s.util = [0] * gpus
    a = s.step([FATAL_LINES["fatal_oom"][0]], cpu_pct=200)
    onset = s.records_t
    for n in range(1, 8):
        if a.final:
            break
        if n == exits_after_polls:
            s.unit = {"active": "failed", "sub": "failed", "main_pid": None, "restarts": 0}
        a = s.step(cpu_pct=5)
    assert (a.verdict, a.reason_code, a.phase) == ("failed", "fatal_oom", "cuda_graph"), describe(s, a)
    assert onset <= a.t <= onset + max(60, 2 * poll_s + 1), describe(s, a)
