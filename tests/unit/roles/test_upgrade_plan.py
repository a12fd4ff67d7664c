"""What playbooks/upgrade.yml does with a host (plugins/filter/upgrade_plan.py), decided from
what runs there as sglang_probe reports it (the unit's ExecStart and its main process's
command line) and the record an unfinished upgrade left: a unit rendered for the new release
while the server still runs the old one is never taken for an upgraded host."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.sglang_ops.serving.plugins.filter.upgrade_plan import sglang_running_venv, sglang_upgrade_plan

OLD, NEW = "/opt/sglang/venvs/0.5.23", "/opt/sglang/venvs/0.5.24"
VERSIONS = {OLD: "0.5.23", NEW: "0.5.24"}
RECORD_PATH = "/var/lib/sglang-ops/upgrade/upgrade.json"
RECORD = {"to_version": "0.5.24", "to_venv": NEW, "from_version": "0.5.23", "from_venv": OLD,
          "kept": [], "kept_links": [], "new": []}


def server(venv):
    return "%s/bin/python -m sglang.launch_server --port 30001" % venv


def exec_start(venv, supervised=True):
    if supervised:
        return ("/usr/bin/python3 -I /usr/local/lib/sglang-ops/sglang-supervisor --settings /etc/sglang/s.json -- "
                + server(venv))
    return "/bin/bash -c '/etc/sglang/exec.sh' " + server(venv)


def probe(unit_venv, running_venv, supervised=True):
    """sglang_probe's unit_state and unit_processes, as on a host (the supervisor as MainPID,
    or bash exec'd into the server; the server's ranks with titles of their own)."""
    state = {"installed": True, "active": "active" if running_venv else "failed", "main_pid": 0,
             "exec_start": "{ path=/usr/bin/python3 ; argv[]=%s ; }" % exec_start(unit_venv, supervised),
             "venv": unit_venv}
    processes = []
    if running_venv:
        state["main_pid"] = 4100
        # bash execs the server, which stays MainPID; the supervisor runs it as a child
        main = exec_start(running_venv) if supervised else server(running_venv)
        processes = [{"pid": 4100, "state": "S", "cmdline": main},
                     {"pid": 4101, "state": "S", "cmdline": server(running_venv)},
                     {"pid": 4102, "state": "R", "cmdline": "sglang::scheduler_TP0"}]
    return {"unit_state": state, "unit_processes": processes}


def plan(unit_venv, running_venv, record=None, to_version="0.5.24", to_venv=NEW, supervised=True):
    return sglang_upgrade_plan(probe(unit_venv, running_venv, supervised), "gpu-a", to_version, to_venv,
                               VERSIONS, record, RECORD_PATH)


@pytest.mark.parametrize("supervised", [True, False])
def test_the_running_venv_is_read_off_the_main_process_not_the_unit(supervised):
    assert sglang_running_venv(probe(NEW, OLD, supervised)) == OLD
    assert sglang_running_venv(probe(OLD, None, supervised)) is None


def test_unit_and_server_on_the_old_release_upgrade():
    result = plan(OLD, OLD)
    assert result["action"] == "upgrade"
    assert (result["from_venv"], result["from_version"]) == (OLD, "0.5.23")
    assert result["say"] == "gpu-a: runs SGLang 0.5.23 from %s; upgrade to 0.5.24 in %s" % (OLD, NEW)


def test_a_stopped_unit_on_the_old_release_upgrades_from_its_unit():
    assert plan(OLD, None)["action"] == "upgrade"


def test_unit_and_server_on_the_new_release_are_left_alone():
    result = plan(NEW, NEW)
    assert result["action"] == "left_alone"
    assert result["say"] == "gpu-a: its unit runs SGLang 0.5.24 from %s already, left alone" % NEW


def test_a_unit_rendered_for_the_new_release_while_the_old_one_runs_is_half_upgraded():
    # the case: ExecStart names the new venv, the server was never restarted
    result = plan(NEW, OLD)
    assert result["action"] == "stop"
    assert result["say"] == (
        "gpu-a is half-upgraded: its unit runs SGLang 0.5.24 from %s (ExecStart), its server runs SGLang 0.5.23 from %s, "
        "and no upgrade of this host left a record (%s); restart it on its unit (playbooks/restart.yml) or put its unit "
        "back (playbooks/site.yml), then upgrade" % (NEW, OLD, RECORD_PATH))


@pytest.mark.parametrize("unit_venv, running_venv", [
    (NEW, OLD),      # killed after the unit was rendered: at the drain, or before the restart
    (OLD, OLD),      # killed during the install, or during a rollback after its restart
    (NEW, None),     # killed while the unit was stopped for the restart
    (NEW, NEW),      # killed during the watch of the new release's start, or before the load balancer
    (OLD, NEW),      # killed during a rollback, its unit files back, not yet restarted
])
def test_a_recorded_upgrade_is_resumed_from_the_release_it_ran(unit_venv, running_venv):
    result = plan(unit_venv, running_venv, RECORD)
    assert result["action"] == "resume", result
    # the record's release, never the unit file's
    assert (result["from_venv"], result["from_version"]) == (OLD, "0.5.23")
    assert result["running_venv"] == running_venv and result["unit_venv"] == unit_venv
    assert result["say"].startswith("gpu-a: resumes the upgrade from 0.5.23 to 0.5.24 that an earlier run left half-done "
                                    "(%s): its unit runs SGLang %s from %s (ExecStart)" % (RECORD_PATH, VERSIONS[unit_venv], unit_venv))


def test_a_record_of_an_upgrade_to_another_release_stops_naming_it():
    result = plan(NEW, OLD, RECORD, to_version="0.5.25", to_venv="/opt/sglang/venvs/0.5.25")
    assert result["action"] == "stop"
    assert result["say"].startswith("gpu-a: an upgrade to 0.5.24 (in %s) from 0.5.23 is unfinished there (%s): "
                                    "its unit runs SGLang 0.5.24" % (NEW, RECORD_PATH))
    assert result["say"].endswith("run the upgrade to 0.5.24 again, which finishes it or rolls it back to 0.5.23, "
                                  "before upgrading to 0.5.25")


def test_a_record_that_does_not_match_what_runs_stops_naming_both():
    other = "/opt/sglang/venvs/0.5.22"
    result = plan(NEW, other, RECORD)
    assert result["action"] == "stop"
    assert "does not match the host: its unit runs SGLang 0.5.24 from %s (ExecStart), its server runs SGLang of an " \
           "unreadable release from %s" % (NEW, other) in result["say"]


def test_the_probe_result_must_hold_the_unit_state():
    with pytest.raises(AnsibleFilterError, match="sglang_upgrade_plan needs sglang_probe's result"):
        sglang_upgrade_plan({"missing": {"unit_state": "systemctl timed out"}}, "gpu-a", "0.5.24", NEW)
