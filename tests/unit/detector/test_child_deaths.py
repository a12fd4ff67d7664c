"""A child that vanished (child_deaths.py): a rank leaving a start that goes on is a death; a
helper leaving is one only when the start freezes after it; the host's words say how it ended."""
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import sglang_dialect
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.child_deaths import wait_status_words
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.observe_only_decision import ObserveOnly

MAIN = 4242


def tree(*members):
    """procs.tree: the launcher and (pid, name) or (pid, name, state, exit_code) members."""
    out = [{"pid": MAIN, "ppid": 1, "name": "python3", "state": "S"}]
    for m in members:
        entry = {"pid": m[0], "ppid": MAIN, "name": m[1], "state": m[2] if len(m) > 2 else "S"}
        if len(m) > 3:
            entry["exit_code"] = m[3]
        out.append(entry)
    return out


def with_tree(s, members, holders=(), **kw):
    extra = dict(kw.pop("extra", {}))
    o = s.obs(extra=extra, **kw)
    o["procs"]["tree"] = tree(*members)
    o["procs"]["count"] = len(o["procs"]["tree"])
    o["gpu_procs"] = [{"pid": pid, "gpu": gpu, "mem_mib": mib} for pid, gpu, mib in holders]
    return s.det.observe(o)


RANKS = [(5001, "sglang::scheduler_TP0"), (5002, "sglang::scheduler_TP1")]
HOLDERS = [(5001, 0, 40000), (5002, 1, 40000)]


def in_capture(s):
    with_tree(s, RANKS, HOLDERS, log=["[2026-11-29 10:00:00 TP0] Capture cuda graph begin. This can take up to several minutes."])
    s.util = [35, 35]
    return with_tree(s, RANKS, HOLDERS, cpu_pct=200)


def test_a_scheduler_that_leaves_mid_capture_fails_the_start_at_once_naming_pid_and_memory(start):
    s = start(gpus=2, poll_s=5.0)
    in_capture(s)
    s.util, s.mem = [0, 0], [40000, 0]
    a = with_tree(s, RANKS[:1], HOLDERS[:1], cpu_pct=3)
    assert (a.verdict, a.reason_code, a.phase) == ("failed", "child_died", "cuda_graph")
    assert "5002" in a.reason and "sglang::scheduler_TP1" in a.reason and "40000 MiB on GPU 1" in a.reason
    assert a.evidence["child_died"]["pid"] == 5002 and a.evidence["rule"].startswith("rule 3: a rank left")


def test_a_dead_rank_ends_an_observe_only_start_as_a_dead_process_does(start):
    s = start(gpus=2, poll_s=5.0, observe_only=ObserveOnly(1800.0, "twice the same", "stalled", "stall_idle", "cuda_graph"))
    in_capture(s)
    a = with_tree(s, RANKS[:1], HOLDERS[:1], cpu_pct=3)
    assert (a.verdict, a.reason_code, a.final) == ("failed", "child_died", True)
    assert s.det.observe(s.obs(cpu_pct=3)).reason_code == "child_died"


def test_a_zombie_rank_is_gone_and_its_wait_status_says_the_signal(start):
    s = start(gpus=2, poll_s=5.0)
    in_capture(s)
    a = with_tree(s, RANKS[:1] + [(5002, "sglang::scheduler_TP1", "Z", 9)], HOLDERS[:1], cpu_pct=3)
    assert a.reason_code == "child_died" and "killed by signal 9 (SIGKILL)" in a.reason


def test_the_launchers_line_names_how_the_child_died(start):
    s = start(gpus=2, poll_s=5.0)
    in_capture(s)
    a = with_tree(s, RANKS[:1], HOLDERS[:1], cpu_pct=3,
                  log=["Subprocess scheduler_1 (pid=5002) crashed with exit code -9. Triggering SIGQUIT for cleanup..."])
    assert a.reason_code == "child_died" and "exit code -9" in a.reason


def test_a_gpu_holder_that_exits_normally_while_the_start_works_is_not_a_death(start):
    s = start(gpus=2, poll_s=5.0)
    in_capture(s)
    helper = RANKS + [(5100, "python3")]
    with_tree(s, helper, HOLDERS + [(5100, 0, 900)], cpu_pct=900)
    verdicts = [with_tree(s, RANKS, HOLDERS, cpu_pct=700) for dummy in range(8)]
    assert all(not a.final for a in verdicts)
    assert "python3 (pid 5100)" in verdicts[-1].evidence["children_left"]


def test_a_gpu_holder_that_exits_0_is_not_a_death_even_when_the_start_goes_quiet(start):
    s = start(gpus=2, poll_s=5.0)
    in_capture(s)
    with_tree(s, RANKS + [(5100, "python3")], HOLDERS + [(5100, 0, 900)], cpu_pct=900)
    s.util = [0, 0]
    a = with_tree(s, RANKS + [(5100, "python3", "Z", 0)], HOLDERS, cpu_pct=3)
    verdicts = [a] + [with_tree(s, RANKS, HOLDERS, cpu_pct=3) for dummy in range(6)]
    assert all(v.reason_code != "child_died" for v in verdicts)


def test_a_gpu_holder_gone_and_the_start_frozen_after_it_is_a_death_within_a_minute(start):
    s = start(gpus=1, poll_s=5.0)
    with_tree(s, [(5100, "python3")], [(5100, 0, 20000)], log=["[2026-11-29 10:00:00 TP0] Capture cuda graph begin."])
    s.util = [40]
    with_tree(s, [(5100, "python3")], [(5100, 0, 20000)], cpu_pct=300)
    s.util, s.mem = [0], [0]
    verdicts = [with_tree(s, [], [], cpu_pct=1) for dummy in range(12)]
    died = [v for v in verdicts if v.final]
    assert died and died[0].reason_code == "child_died" and died[0].t - verdicts[0].t <= 60 - 5
    assert "20000 MiB on GPU 0" in died[0].reason


def test_without_a_tree_a_holder_gone_as_the_units_count_falls_is_seen(start):
    """A trace recorded before procs.tree: the holder's pid leaves gpu_procs as the count falls."""
    s = start(gpus=1, poll_s=5.0)
    s.comm = {"python3": 2}

    def poll(holders, **kw):
        o = s.obs(**kw)
        o["gpu_procs"] = [{"pid": pid, "gpu": 0, "mem_mib": 20000} for pid in holders]
        return s.det.observe(o)
    poll([5100], log=["[2026-11-29 10:00:00 TP0] Capture cuda graph begin."])
    s.util = [40]
    poll([5100], cpu_pct=300)
    s.comm, s.util, s.mem = {"python3": 1}, [0], [0]
    verdicts = [poll([], cpu_pct=1) for dummy in range(12)]
    died = [v for v in verdicts if v.final]
    assert died and died[0].reason_code == "child_died" and died[0].evidence["child_died"]["pid"] == 5100


def test_compile_workers_coming_and_going_are_never_deaths(start):
    s = start(gpus=1, poll_s=5.0)
    with_tree(s, RANKS[:1], HOLDERS[:1])
    verdicts = []
    for n in range(20):
        workers = [(6000 + i, "python3") for i in range(n % 4)]
        verdicts.append(with_tree(s, RANKS[:1] + workers, HOLDERS[:1], cpu_pct=900 if n % 2 else 100))
    assert not any(v.final for v in verdicts)


def test_wait_status_words():
    assert wait_status_words(9) == "killed by signal 9 (SIGKILL)"
    assert wait_status_words(1 << 8) == "exited with status 1"
    assert wait_status_words(None) == ""


def test_death_lines_of_the_launcher_and_the_kernel():
    assert sglang_dialect.child_death_line("Child process unexpectedly failed with exitcode=9. pid=77") == (77, "exit status 9")
    assert sglang_dialect.child_death_line("Out of memory: Killed process 4711 (python3) total-vm:1kB") == (
        4711, "killed by the kernel's OOM killer")
    assert sglang_dialect.child_death_line(
        "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),task=python3,pid=4711,uid=0")[0] == 4711
    assert sglang_dialect.child_death_line("Load weight end.") is None
