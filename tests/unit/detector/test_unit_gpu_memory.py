"""A board the start shares with other processes: GPU memory as progress is the memory of the
start's own processes (gpu_procs), the board's reading only where the observation does not list
the holders; a board read flat out is no spin of this start while its rank computes on the host."""
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.unit_gpu_memory import UnitGpuMemory

NEIGHBOUR, RANK = 1205, 4300


def _board_shared(s, neighbour_mib, rank_mib, **kw):
    """One poll of a board the start shares: the board reading counts both holders."""
    s.mem = [neighbour_mib + rank_mib + 500]
    holders = [{"pid": RANK, "gpu": 0, "mem_mib": rank_mib}]
    if neighbour_mib:
        holders.append({"pid": NEIGHBOUR, "gpu": 0, "mem_mib": neighbour_mib})
    return s.poll(extra={"gpu_procs": holders}, **kw)


def _alone_first(s):
    """A first poll while the unit is its main process alone: every holder listed is another's."""
    s.comm = {"python3": 1}
    s.mem = [9960]
    return s.poll(extra={"gpu_procs": [{"pid": NEIGHBOUR, "gpu": 0, "mem_mib": 9460}]})


def test_a_neighbours_release_of_gpu_memory_is_not_the_starts_progress(start):
    s = start(gpus=1)
    _alone_first(s)
    s.comm = {"python3": 2}
    _board_shared(s, 9460, 9556)
    _board_shared(s, 9460, 9556)
    a = _board_shared(s, 0, 9556)   # the neighbour exits: the board reading drops 9.5 GiB
    assert "gpu_mem" not in a.evidence["moved"], a.evidence


def test_the_starts_own_allocation_is_progress_beside_a_neighbour(start):
    s = start(gpus=1)
    _alone_first(s)
    s.comm = {"python3": 2}
    _board_shared(s, 9460, 2000)
    a = _board_shared(s, 9460, 9556)
    assert "gpu_mem" in a.evidence["moved"], a.evidence


def test_without_the_holders_listed_the_board_reading_moves(start):
    s = start(gpus=1)
    s.poll()
    s.mem = [s.mem[0] + 9000]
    assert "gpu_mem" in s.poll().evidence["moved"]


def test_a_holder_of_unknown_ownership_counts_as_the_units():
    mem = UnitGpuMemory()
    # two processes in the unit, only the main PID known: neither holder can be ruled out
    obs = {"unit": {"main_pid": 1794}, "procs": {"count": 2},
           "gpu_procs": [{"pid": 1796, "gpu": 0, "mem_mib": 4436}, {"pid": 1800, "gpu": 0, "mem_mib": 9556}]}
    assert mem.per_gpu(obs) == {0: 4436 + 9556}
    # a py-spy sample names the rank: the other holder is another's from now on
    obs["stacks"] = [{"pid": 1800, "rank": 0, "frames": ["synchronize"]}]
    assert mem.per_gpu(obs) == {0: 9556}
    del obs["stacks"]
    assert mem.per_gpu(obs) == {0: 9556}
    assert mem.per_gpu({"procs": {"count": 2}}) is None


def test_a_board_read_flat_out_is_no_spin_while_the_ranks_stack_shows_host_work(start):
    # a shared board: another process's kernel holds it at 100 % while this start's rank
    # runs a CPU phase (its stack in a compute frame, not a wait)
    s = start(gpus=1)
    s.power = [122.0]
    s.util = [0]
    s.polls(30, cpu_pct=100)
    s.util = [100]
    work = [{"pid": 4300, "rank": 0, "frames": ["cpu_phase", "rank_main", "main"]}]
    out = []
    for i in range(60):
        out.append(s.poll(cpu_pct=100, extra={"stacks": work} if i % 3 == 0 else None))
    assert not any(a.final for a in out), next(a for a in out if a.final).reason


def test_a_gpu_is_shared_while_a_holder_known_to_be_anothers_is_listed_on_it():
    memory = UnitGpuMemory()
    first = {"unit": {"main_pid": RANK}, "procs": {"count": 1},
             "gpu_procs": [{"pid": NEIGHBOUR, "gpu": 0, "mem_mib": 9460}, {"pid": RANK, "gpu": 1, "mem_mib": 500}]}
    memory.per_gpu(first)
    assert memory.shared_gpus(first) == {0}
    later = {"unit": {"main_pid": RANK}, "procs": {"count": 3},
             "gpu_procs": [{"pid": RANK, "gpu": 1, "mem_mib": 9000}, {"pid": RANK + 1, "gpu": 0, "mem_mib": 9000}]}
    memory.per_gpu(later)
    assert memory.shared_gpus(later) == set()        # the neighbour left: the board is the unit's alone
    assert memory.shared_gpus({"gpus": []}) == set()  # no holders listed: nothing known to be shared
