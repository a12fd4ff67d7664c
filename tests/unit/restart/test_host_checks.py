import subprocess

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.systemd_unit import check_unit_name
from ansible_collections.sglang_ops.serving.plugins.plugin_utils import host_checks as hc

UNIT = "sglang-k26-ddtree"
VENV = "/opt/sglang/venv"


def _holders(*rows):
    lines = ["GPU\t0\tGPU-aaa\t40000\t97887", "GPU\t1\tGPU-bbb\t900\t97887"]
    lines += ["HOLDER\t" + "\t".join(r) for r in rows]
    return "\n".join(lines) + "\n"


def test_processes_are_sorted_into_unit_orphan_and_foreign():
    text = _holders(("101", "GPU-aaa", "30000", "yes", "sglang::scheduler_TP0 "),
                    ("202", "GPU-aaa", "9000", "no", "sglang::scheduler_TP1 "),
                    ("303", "GPU-bbb", "500", "no", VENV + "/bin/python -m sglang.launch_server "),
                    ("404", "GPU-bbb", "400", "no", "/usr/bin/python3 train.py --epochs 3 "))
    check = hc.classify_holders(hc.parse_gpu_holders(text), VENV)
    assert [(h.pid, h.kind) for h in check.holders] == [
        (101, "unit"), (202, "orphan"), (303, "orphan"), (404, "foreign")]
    assert "PID 404" in check.of_kind("foreign")[0].describe()
    assert "train.py" in check.of_kind("foreign")[0].describe()


def test_other_venv_python_is_foreign():
    check = hc.classify_holders(hc.parse_gpu_holders(
        _holders(("5", "GPU-aaa", "10", "no", "/opt/sglang/venv-old/bin/python x"))), VENV)
    assert check.holders[0].kind == "foreign"


def test_missing_nvidia_smi_is_reported_not_fatal():
    check = hc.parse_gpu_holders("NOSMI\n")
    assert not check.available
    assert hc.gpu_released(check, 1024) == (True, "")


def test_gpu_not_released_while_an_orphan_holds_memory():
    check = hc.classify_holders(hc.parse_gpu_holders(
        _holders(("202", "GPU-aaa", "9000", "no", "sglang::scheduler_TP1"))), VENV)
    released, why = hc.gpu_released(check, 1024)
    assert not released and "PID 202" in why


def test_gpu_memory_above_baseline_without_a_listed_process_is_not_released():
    check = hc.classify_holders(hc.parse_gpu_holders(_holders()), VENV)
    released, why = hc.gpu_released(check, 1024)
    assert not released and "GPU 0: 40000 MiB" in why


def test_memory_held_by_a_known_foreign_process_counts_as_baseline():
    text = "GPU\t0\tGPU-aaa\t5000\t97887\nHOLDER\t9\tGPU-aaa\t4500\tno\t/usr/bin/other\n"
    check = hc.classify_holders(hc.parse_gpu_holders(text), VENV)
    assert hc.gpu_released(check, 1024) == (True, "")


@pytest.mark.parametrize("exec_start,venv", [
    ("{ path=/opt/sglang/venv/bin/python ; argv[]=/opt/sglang/venv/bin/python -m sglang.launch_server ; }",
     "/opt/sglang/venv"),
    ("{ path=/bin/bash ; argv[]=/bin/bash -c 'exec /srv/v/bin/python3.11 -m sglang.launch_server' ; }", "/srv/v"),
    ("{ path=/usr/bin/sleep ; argv[]=sleep 1 ; }", None),
])
def test_venv_is_read_off_exec_start(exec_start, venv):
    assert hc.venv_prefix(exec_start) == venv


@pytest.mark.parametrize("bad", ["", "a b", "x;reboot", "$(id)"])
def test_unit_names_that_could_inject_shell_are_refused(bad):
    with pytest.raises(ValueError):
        check_unit_name(bad)


def test_unit_listing_matches_only_the_units_cgroup_line():
    pattern = hc._cgroup_match(UNIT)
    lines = ["1:name=systemd:/system.slice/sglang-k26-ddtree.service",
             "0::/system.slice/sglang-k26-ddtree.service/worker",
             "1:name=systemd:/system.slice/sglang-k26-ddtreeXservice",
             "1:name=systemd:/system.slice/sglang-k26-ddtree.service-other"]
    out = subprocess.run(["grep", "-E", pattern], input="\n".join(lines) + "\n",
                         capture_output=True, text=True, check=False)
    assert out.stdout.splitlines() == lines[:2]
    assert out.stderr == ""


@pytest.mark.parametrize("name", ["py-spy", "processes", "nvidia-smi", "journal", "unit-status", "ports"])
def test_diagnostic_commands_are_valid_shell(name):
    cmd = hc.diagnostics_cmds(UNIT, 1000, VENV)[name]
    assert subprocess.run(["bash", "-n", "-c", cmd], check=False).returncode == 0


def test_holder_listing_is_valid_shell_and_says_when_nvidia_smi_is_missing():
    cmd = hc.gpu_holders_cmd(UNIT)
    out = subprocess.run(["/bin/bash", "-c", cmd], capture_output=True, text=True,
                         env={"PATH": "/nonexistent"}, check=False)
    assert out.stdout.strip() == "NOSMI"


def test_pyspy_output_is_split_per_rank():
    text = ("=== PYSPY 11 sglang::scheduler_TP0 \nProcess 11: sglang::scheduler_TP0\nThread 11 (idle): \"MainThread\"\n"
            "=== PYSPY 12 sglang::scheduler_TP1 \nThread 12 (idle): \"MainThread\"\n"
            "=== PYSPY 10 /opt/sglang/venv/bin/python -m sglang.launch_server\nThread 10 (active)\n")
    parts = hc.split_pyspy(text)
    assert sorted(parts) == ["pid10", "rank0", "rank1"]
    assert "Process 11" in parts["rank0"]
