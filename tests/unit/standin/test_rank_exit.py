"""Which rank ends the stand-in's server after a fatal line with `then: exit`: the ranks that
print it, once their lines are out; rank 0 only when none of them runs on its node. An exit
sent by rank 0 beside a printing rank let the server kill that rank before its lines on a
loaded host, and the start ended without the line that says why."""
from sglang.standin import faults as faults_mod
from sglang.standin.rank import Rank


def rank_of(rank, local_index, ranks_on_node):
    """A Rank with only what the exit decision reads (no process, socket or GPU)."""
    r = Rank.__new__(Rank)
    r.rank, r.spec = rank, {"local_index": local_index, "ranks_on_node": ranks_on_node}
    return r


def fault(**kw):
    return faults_mod.parse([dict({"kind": "fatal", "phase": "cuda_graph", "line": "oom", "then": "exit"}, **kw)])[0]


def test_a_printing_rank_on_the_node_ends_the_server_not_rank_0():
    f = fault(ranks=[3])
    assert [rank_of(r, r, 8)._sends_exit(f) for r in range(8)] == [r == 3 for r in range(8)]


def test_rank_0_ends_it_when_no_rank_of_its_node_prints():
    f = fault(ranks=[3])
    assert [rank_of(r, r, 2)._sends_exit(f) for r in range(2)] == [True, False]


def test_without_ranks_rank_0_prints_and_ends_it_alone():
    assert [rank_of(r, r, 8)._sends_exit(fault()) for r in range(8)] == [r == 0 for r in range(8)]
