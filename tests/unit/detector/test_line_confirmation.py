"""Rule 1's unit: a lethal-looking line is a hypothesis until an exit or a freeze confirms it."""
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.line_confirmation import (
    CONFIRMED_DEAD, CONFIRMED_FROZEN, SURVIVED, LineConfirmation)


def conf():
    return LineConfirmation(confirm_window_s=60.0, freeze_min_s=10.0, priority={"fatal_oom": 0, "fatal_error": 9}.get)


def test_the_process_exiting_confirms_the_line():
    c = conf()
    c.on_line(100.0, "fatal_error", "KeyError: x", "weight_load", 105.0)
    outcome, h = c.judge(115.0, "server process exited", [], None)
    assert outcome == CONFIRMED_DEAD and h.code == "fatal_error" and c.open is None


def test_a_freeze_in_the_polls_after_the_line_confirms_it():
    c = conf()
    c.on_line(100.0, "fatal_error", "KeyError: x", "weight_load", 105.0)
    assert c.judge(105.0, None, [], True) == (None, None)      # the poll that brought it says nothing of after
    outcome, h = c.judge(115.0, None, [], True)
    assert outcome == CONFIRMED_FROZEN and h.line == "KeyError: x"


def test_a_sign_of_life_after_the_line_means_it_was_survived():
    c = conf()
    c.on_line(100.0, "fatal_oom", "OutOfMemoryError: out of resource", "cuda_graph", 105.0)
    outcome, h = c.judge(115.0, None, ["children", "cpu"], False)
    assert outcome == SURVIVED and c.survived[-1] is h and c.open is None


def test_a_line_printed_after_it_in_the_same_poll_means_it_was_survived():
    c = conf()
    c.on_line(100.0, "fatal_oom", "OutOfMemoryError: out of resource", "cuda_graph", 105.0)
    assert c.judge(105.0, None, ["log"], None)[0] == SURVIVED


def test_no_confirmation_within_the_window_means_survived():
    c = conf()
    c.on_line(100.0, "fatal_error", "ValueError: x", "post_load", 105.0)
    for t in (115.0, 135.0, 155.0):
        assert c.judge(t, None, [], None) == (None, None)
    assert c.judge(165.0, None, [], None)[0] == SURVIVED


def test_a_death_soon_after_a_survived_line_is_still_named_after_it():
    c = conf()
    c.on_line(100.0, "fatal_oom", "OutOfMemoryError", "cuda_graph", 105.0)
    c.judge(115.0, None, ["cpu"], False)
    outcome, h = c.judge(125.0, "server process exited", [], None)
    assert outcome == CONFIRMED_DEAD and h.code == "fatal_oom"
    assert c.judge(400.0, "server process exited", [], None) == (None, None)


def test_a_more_specific_class_sharpens_the_open_hypothesis():
    c = conf()
    c.on_line(100.0, "fatal_error", "Traceback", "cuda_graph", 105.0)
    c.on_line(100.5, "fatal_oom", "torch.OutOfMemoryError", "cuda_graph", 105.0)
    assert c.open.code == "fatal_oom" and c.open.t == 100.0
