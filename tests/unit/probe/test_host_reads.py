"""The probe's reads for the restart: the unit's state, GPU holders with their cgroup
membership, and the processes left in a unit, over a /proc laid out in tmp_path."""
import os

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import cgroup, gpu_holders, nvidia_smi, systemd_unit
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import weight_cache
from ansible_collections.sglang_ops.serving.tests.unit.probe.conftest import data

SERVICE = "sglang-k26-ddtree.service"
IN_UNIT_V1 = "1:name=systemd:/system.slice/sglang-k26-ddtree.service\n"


def _proc(root, pid, cmdline, cgroup_text, state="S"):
    d = root / str(pid)
    d.mkdir()
    (d / "cmdline").write_bytes(cmdline.replace(" ", "\0").encode() + b"\0")
    (d / "cgroup").write_text(cgroup_text)
    (d / "stat").write_text("%d (%s) %s 1 %d 0 0 0 0 0 0 0 0 0 5 6 0 0\n" % (pid, cmdline.split(" ")[0][-15:], state, pid))


@pytest.mark.parametrize("line,member", [
    ("1:name=systemd:/system.slice/sglang-k26-ddtree.service", True),
    ("0::/system.slice/sglang-k26-ddtree.service/worker", True),
    ("1:name=systemd:/system.slice/sglang-k26-ddtreeXservice", False),
    ("1:name=systemd:/system.slice/sglang-k26-ddtree.service-other", False),
    ("0::/user.slice/user-0.slice/session-1.scope", False),
])
def test_cgroup_membership_names_the_unit_or_a_cgroup_below_it(line, member):
    assert cgroup.names_unit("12:cpu:/\n" + line + "\n", SERVICE) is member


def _gpu_host(tmp_path, script_dir, gpu_line, holders):
    """An nvidia-smi answering gpu_line and one compute app per (pid, mib, cmdline, cgroup),
    the processes in a /proc of their own; -> (the readings, that /proc)."""
    apps = "".join("%d, GPU-aaa, %d\\n" % (pid, mib) for pid, mib, _cmd, _cg in holders)
    fake = script_dir("nvidia-smi", """\
        case "$1" in
          --query-gpu=*) echo "%s" ;;
          --query-compute-apps=*) printf '%s' ;;
        esac
        """ % (gpu_line, apps))
    proc_root = tmp_path / "proc"
    proc_root.mkdir()
    for pid, _mib, cmdline, cgroup_text in holders:
        _proc(proc_root, pid, cmdline, cgroup_text)
    return nvidia_smi.read_gpus(2.0, fake), str(proc_root)


TRAINING_JOB = (202, 9000, "/usr/bin/python3 train.py", "0::/user.slice/session-1.scope\n")


def test_gpu_holders_say_which_belong_to_the_unit(tmp_path, script_dir):
    readings, proc_root = _gpu_host(tmp_path, script_dir, "0, GPU-aaa, 40000, 97887, 12, 300.5",
                                    [(101, 30000, "sglang::scheduler_TP0", IN_UNIT_V1), TRAINING_JOB])
    held = gpu_holders.holders_of(readings, SERVICE, proc_root)
    assert held["available"] is True and held["error"] == ""
    assert held["gpus"] == [{"index": 0, "uuid": "GPU-aaa", "mem_used_mib": 40000, "mem_total_mib": 97887}]
    assert [(h["pid"], h["gpu_uuid"], h["mem_mib"], h["in_unit"], h["cmdline"]) for h in held["holders"]] == [
        (101, "GPU-aaa", 30000, True, "sglang::scheduler_TP0"),
        (202, "GPU-aaa", 9000, False, "/usr/bin/python3 train.py")]


def test_the_weight_cache_daemons_gpu_memory_is_expected_not_foreign(tmp_path, script_dir):
    daemon = (303, 50000, "python -m sglang.srt.weight_cache.daemon", IN_UNIT_V1.replace(".service", "-weights.service"))
    readings, proc_root = _gpu_host(tmp_path, script_dir, "0, GPU-aaa, 80000, 97887, 0, 90.0",
                                    [(101, 30000, "sglang::scheduler_TP0", IN_UNIT_V1), daemon, TRAINING_JOB])
    held = gpu_holders.holders_of(readings, SERVICE, proc_root, expected_units=(weight_cache.daemon_unit(SERVICE),))
    assert [(h["pid"], h["in_unit"], h["expected"]) for h in held["holders"]] == [
        (101, True, False), (303, False, True), (202, False, False)]


def test_gpu_holders_without_nvidia_smi_are_unavailable_with_the_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(nvidia_smi, "EXTRA_DIRS", ())
    held = gpu_holders.holders_of(nvidia_smi.read_gpus(1.0), SERVICE)
    assert held["available"] is False and "nvidia-smi not found" in held["error"] and held["holders"] == []


def test_gpu_holders_after_a_hung_query_name_the_hang(script_dir):
    held = gpu_holders.holders_of(nvidia_smi.read_gpus(0.5, script_dir("nvidia-smi", "/bin/sleep 30\n")), SERVICE)
    assert held["available"] is False and held["error"] == "nvidia-smi --query-gpu timed out"


def test_unit_processes_are_those_of_its_cgroup_with_their_state(tmp_path):
    _proc(tmp_path, 77, "sglang::scheduler_TP0", IN_UNIT_V1, state="T")
    _proc(tmp_path, 78, "/opt/sglang/venvs/0.5.23/bin/python -m sglang.launch_server",
          "0::/system.slice/sglang-k26-ddtree.service/payload\n", state="Z")
    _proc(tmp_path, 79, "/usr/sbin/sshd", "0::/system.slice/ssh.service\n")
    assert cgroup.unit_processes(SERVICE, str(tmp_path)) == [
        {"pid": 77, "state": "T", "cmdline": "sglang::scheduler_TP0"},
        {"pid": 78, "state": "Z", "cmdline": "/opt/sglang/venvs/0.5.23/bin/python -m sglang.launch_server"}]


def test_unit_state_for_the_restart_carries_exec_start_and_the_venv():
    text = data("systemctl-show-running.txt") + (
        "ExecStart={ path=/opt/sglang/venvs/0.5.23/bin/python ; argv[]=/opt/sglang/venvs/0.5.23/bin/python -m sglang.launch_server ; }\n")
    state = systemd_unit.parse_show(text).to_result()
    assert state["installed"] is True and (state["active"], state["sub"]) == ("active", "running")
    assert state["venv"] == "/opt/sglang/venvs/0.5.23" and state["exec_start"].startswith("{ path=/opt/sglang/venvs/0.5.23")
    missing = systemd_unit.parse_show("LoadState=not-found\nActiveState=inactive\nSubState=dead\n").to_result()
    assert missing["installed"] is False and missing["venv"] is None


@pytest.mark.parametrize("exec_start,venv", [
    ("{ path=/opt/sglang/venvs/0.5.23/bin/python ; argv[]=/opt/sglang/venvs/0.5.23/bin/python -m sglang.launch_server ; }",
     "/opt/sglang/venvs/0.5.23"),
    ("{ path=/bin/bash ; argv[]=/bin/bash -c 'exec /srv/v/bin/python3.11 -m sglang.launch_server' ; }", "/srv/v"),
    ("{ path=/usr/bin/python3 ; argv[]=/usr/bin/python3 -I /usr/lib/sglang-ops/sglang-supervisor -- "
     "/opt/v2/bin/python -m sglang.launch_server ; }", "/opt/v2"),
    ("{ path=/usr/bin/sleep ; argv[]=sleep 1 ; }", None),
])
def test_venv_is_read_off_exec_start(exec_start, venv):
    assert systemd_unit.venv_prefix(exec_start) == venv


def test_a_pid_of_the_test_itself_is_not_in_a_unit_it_does_not_run_in():
    assert cgroup.in_unit(os.getpid(), "no-such-unit-here.service") is False
    assert cgroup.in_unit(2 ** 22 + 7, SERVICE) is False  # no such process
