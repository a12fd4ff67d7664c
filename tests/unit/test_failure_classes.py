from ansible_collections.sglang_ops.serving.plugins.module_utils import failure_classes as fc

import pytest


def test_every_class_has_a_known_verdict_and_words():
    for code, cls in fc.FAILURE_CLASSES.items():
        assert cls.code == code
        assert cls.verdict in ("failed", "stalled", "preflight")
        assert cls.title and cls.why


def test_unknown_code_is_named_in_the_error():
    with pytest.raises(KeyError, match="no_such_code"):
        fc.failure_class("no_such_code")


def test_hung_collectives_are_not_restarted_but_idle_stalls_are():
    assert not fc.restart_helps("stall_spin")
    assert not fc.restart_helps("fatal_oom")
    assert fc.restart_helps("stall_idle")
    assert fc.restart_helps("process_exited")
