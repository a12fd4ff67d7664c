import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.host.systemd_unit import check_unit_name
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared import host_checks as hc

VENV = "/opt/sglang/venvs/0.5.23"


def _holders(*rows, gpus=(("GPU-aaa", 40000), ("GPU-bbb", 900))):
    """The probe's gpu_holders from (pid, gpu_uuid, mem_mib, in_unit, cmdline) rows."""
    return {"available": True, "error": "",
            "gpus": [{"index": i, "uuid": uuid, "mem_used_mib": used, "mem_total_mib": 97887}
                     for i, (uuid, used) in enumerate(gpus)],
            "holders": [{"pid": pid, "gpu_uuid": uuid, "mem_mib": mem, "in_unit": in_unit, "cmdline": cmd}
                        for pid, uuid, mem, in_unit, cmd in rows]}


def test_processes_are_sorted_into_unit_orphan_and_foreign():
    held = _holders((101, "GPU-aaa", 30000, True, "sglang::scheduler_TP0"),
                    (202, "GPU-aaa", 9000, False, "sglang::scheduler_TP1"),
                    (303, "GPU-bbb", 500, False, VENV + "/bin/python -m sglang.launch_server"),
                    (404, "GPU-bbb", 400, False, "/usr/bin/python3 train.py --epochs 3"))
    check = hc.classify_holders(hc.gpu_check(held), VENV)
    assert [(h.pid, h.kind) for h in check.holders] == [
        (101, "unit"), (202, "orphan"), (303, "orphan"), (404, "foreign")]
    assert "PID 404" in check.of_kind("foreign")[0].describe()
    assert "train.py" in check.of_kind("foreign")[0].describe()


def test_other_venv_python_is_foreign():
    check = hc.classify_holders(hc.gpu_check(
        _holders((5, "GPU-aaa", 10, False, "/opt/sglang/venvs/0.5.22/bin/python x"))), VENV)
    assert check.holders[0].kind == "foreign"


def test_missing_nvidia_smi_is_reported_not_fatal():
    check = hc.gpu_check({"available": False, "error": "nvidia-smi not found (PATH, /usr/local/nvidia/bin)",
                          "gpus": [], "holders": []})
    assert not check.available and "not found" in check.error
    assert hc.gpu_released(check, 1024) == (True, "")


def test_gpu_not_released_while_an_orphan_holds_memory():
    check = hc.classify_holders(hc.gpu_check(
        _holders((202, "GPU-aaa", 9000, False, "sglang::scheduler_TP1"))), VENV)
    released, why = hc.gpu_released(check, 1024)
    assert not released and "PID 202" in why


def test_gpu_memory_above_baseline_without_a_listed_process_is_not_released():
    check = hc.classify_holders(hc.gpu_check(_holders()), VENV)
    released, why = hc.gpu_released(check, 1024)
    assert not released and "GPU 0: 40000 MiB" in why


def test_memory_held_by_a_known_foreign_process_counts_as_baseline():
    held = _holders((9, "GPU-aaa", 4500, False, "/usr/bin/other"), gpus=(("GPU-aaa", 5000),))
    check = hc.classify_holders(hc.gpu_check(held), VENV)
    assert hc.gpu_released(check, 1024) == (True, "")


@pytest.mark.parametrize("bad", ["", "a b", "x;reboot", "$(id)"])
def test_unit_names_that_could_inject_shell_are_refused(bad):
    with pytest.raises(ValueError):
        check_unit_name(bad)


def test_the_stop_is_over_once_the_unit_is_inactive_or_failed_and_a_pending_restart_is_seen():
    assert hc.settled_after_stop({"active": "failed", "sub": "failed"})
    assert not hc.settled_after_stop({"active": "deactivating", "sub": "stop-sigterm"})
    assert hc.restart_pending({"active": "activating", "sub": "auto-restart"})
    assert not hc.restart_pending({"active": "inactive", "sub": "dead"})
