from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import failure_classes as fc

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


def test_exit_statuses_are_distinct_and_outside_systemds_own_range():
    statuses = [c.exit_code for c in fc.supervisor_exit_classes()]
    assert len(statuses) == len(set(statuses))
    assert all(1 < s < 128 and s not in (126, 127) for s in statuses)
    assert all(fc.class_of_exit_code(c.exit_code) is c for c in fc.supervisor_exit_classes())


def test_systemd_is_kept_from_restarting_exactly_the_classes_a_restart_cannot_help():
    prevent = fc.restart_prevent_exit_statuses()
    for c in fc.supervisor_exit_classes():
        assert (c.exit_code in prevent) == (not c.restart_helps), c.code
    assert fc.exit_code("fatal_oom") in prevent and fc.exit_code("stall_idle") not in prevent


def test_every_class_the_detector_or_the_supervisor_decides_has_an_exit_status():
    decided = {c.code for c in fc.FAILURE_CLASSES.values() if c.verdict in ("failed", "stalled")}
    assert decided <= {c.code for c in fc.supervisor_exit_classes()}
    with pytest.raises(KeyError, match="never ends a start"):
        fc.exit_code("gpu_busy_foreign")


def test_the_runbook_carries_the_exit_status_table_rendered_from_the_classes():
    import os
    runbook = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "runbook.md")
    with open(runbook, encoding="utf-8") as fh:
        assert fc.exit_status_table() in fh.read(), "docs/runbook.md: paste fc.exit_status_table() again"


def test_the_classes_that_implicate_the_weights_or_the_gpus_are_pinned():
    # A warm restart re-attaches to the weight cache daemon's copy on the GPUs: these
    # classes make the next restart cold (domain/weight_cache.py).
    assert fc.weight_implicating_codes() == [
        "fatal_checkpoint", "fatal_nccl", "fatal_packing", "fatal_watchdog", "gpu_not_released",
        "stall_spin", "weight_cache_daemon_died"]
    assert not fc.implicates_weights("stall_idle") and fc.implicates_weights("fatal_checkpoint")


def test_a_dead_weight_cache_daemon_is_a_failure_a_restart_helps():
    cls = fc.failure_class("weight_cache_daemon_died")
    assert cls.verdict == "failed" and cls.restart_helps and cls.implicates_weights
    assert fc.exit_code("weight_cache_daemon_died") not in fc.restart_prevent_exit_statuses()
