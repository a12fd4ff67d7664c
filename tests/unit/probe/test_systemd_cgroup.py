"""`systemctl show` output captured from a real systemd, and cgroup layouts."""
import os

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import cgroup, systemd_unit
from ansible_collections.sglang_ops.serving.tests.unit.probe.conftest import data


def test_running_unit_state():
    st = systemd_unit.parse_show(data("systemctl-show-running.txt"))
    assert st.to_obs() == {"active": "active", "sub": "running", "main_pid": 67, "restarts": 0,
                           "exec_main_status": 0, "result": "success"}
    assert st.control_group.endswith("/system.slice/probe-demo.service")
    assert st.inactive_exit_epoch_s == 1795986168.0
    assert st.environment_files == ["/etc/probe-demo.env"]


def test_killed_unit_has_no_main_pid_and_reports_the_signal():
    st = systemd_unit.parse_show(data("systemctl-show-killed.txt"))
    assert st.to_obs() == {"active": "failed", "sub": "failed", "main_pid": None, "restarts": 0,
                           "exec_main_status": 9, "result": "signal"}
    assert st.control_group == ""


def test_a_line_separator_inside_execstart_forges_no_property():
    # systemctl ends a property with \n only; a served model name holding any other line break
    # str.splitlines() knows (the role refuses them, a unit written by hand may not) stays
    # inside ExecStart instead of overriding the properties systemd printed.
    forged = "MainPID=4242{0}NRestarts=0{0}Result=success{0}ActiveState=active".format
    for separator in ("\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\r"):
        exec_start = ("{ path=/opt/sglang/venvs/0.5.23/bin/python ; argv[]=/opt/sglang/venvs/0.5.23/bin/python "
                      "-m sglang.launch_server --served-model-name kimi" + separator + forged(separator) + " ; }")
        st = systemd_unit.parse_show(data("systemctl-show-killed.txt") + "ExecStart=" + exec_start + "\n")
        assert st.to_obs() == {"active": "failed", "sub": "failed", "main_pid": None, "restarts": 0,
                               "exec_main_status": 9, "result": "signal"}, repr(separator)
        assert st.exec_start == exec_start
        assert systemd_unit.venv_prefix(st.exec_start) == "/opt/sglang/venvs/0.5.23"


@pytest.mark.parametrize("name", ["sglang-k26-ddtree\n", "sglang\nExecStart", ""])
def test_a_unit_name_with_a_line_break_is_refused(name):
    with pytest.raises(ValueError, match="not a valid systemd unit name"):
        systemd_unit.check_unit_name(name)
    assert systemd_unit.check_unit_name("sglang-k26-ddtree") == "sglang-k26-ddtree"


def _mkcg(root, rel, pids):
    d = os.path.join(root, rel)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "cgroup.procs"), "w") as f:
        f.write("".join("%d\n" % p for p in pids))
    return d


def test_cgroup_v2_pids_include_sub_cgroups(tmp_path):
    root = str(tmp_path)
    open(os.path.join(root, "cgroup.controllers"), "w").close()
    _mkcg(root, "system.slice/s.service", [10, 11])
    _mkcg(root, "system.slice/s.service/payload", [12])
    assert cgroup.cgroup_pids("/system.slice/s.service", root) == ([10, 11, 12], None)


def test_cgroup_v1_named_systemd_hierarchy_with_a_container_prefix(tmp_path):
    # As inside the podman test host on these machines: ControlGroup holds the host
    # path; the named hierarchy may be mounted with or without that prefix.
    root = str(tmp_path)
    _mkcg(root, "systemd/system.slice/s.service", [67, 69])
    pids, why = cgroup.cgroup_pids("/libpod_parent/libpod-abc/system.slice/s.service", root)
    assert (pids, why) == ([67, 69], None)


def test_hybrid_prefers_the_unified_hierarchy(tmp_path):
    root = str(tmp_path)
    _mkcg(root, "unified/system.slice/s.service", [5])
    _mkcg(root, "systemd/system.slice/s.service", [5, 99])
    assert cgroup.cgroup_pids("/system.slice/s.service", root) == ([5], None)


def test_missing_cgroup_and_stopped_unit_give_reasons(tmp_path):
    assert cgroup.cgroup_pids("", str(tmp_path))[0] is None
    pids, why = cgroup.cgroup_pids("/system.slice/gone.service", str(tmp_path))
    assert pids is None and "not found" in why
