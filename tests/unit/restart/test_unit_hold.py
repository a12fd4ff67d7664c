"""On-call's hold of a unit (docs/runbook.md#stop-the-automation): the drop-in systemd reports
in DropInPaths makes a restart refuse before anything is done, and status say so."""
import os
import re
import subprocess

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import systemd_unit

from ansible_collections.sglang_ops.serving.tests.unit.restart.restart_fakes import FakeHost, make_procedure, ready

HOLD = systemd_unit.hold_path("sglang-k26-ddtree")


class HeldHost(FakeHost):
    def _unit_state(self):
        return dict(super()._unit_state(), held=HOLD)


def test_the_hold_drop_in_is_read_from_systemctl_show():
    text = ("ActiveState=active\nSubState=running\nLoadState=loaded\n"
            "DropInPaths=/etc/systemd/system/sglang-k26-ddtree.service.d/10-x.conf %s\n" % HOLD)
    assert systemd_unit.parse_show(text).to_result()["held"] == HOLD
    assert systemd_unit.parse_show("LoadState=loaded\nDropInPaths=\n").to_result()["held"] is None
    assert HOLD == "/run/systemd/system/sglang-k26-ddtree.service.d/sglang-ops-hold.conf"
    assert systemd_unit.hold_text("sglang-k26-ddtree") == "[Unit]\nConditionPathExists=!%s\n[Service]\nRestart=no\n" % HOLD


def test_a_held_unit_is_handed_over_in_preflight_and_nothing_is_done(tmp_path):
    proc, host, *_others = make_procedure(tmp_path, [[ready()]], host=HeldHost())
    res = proc.restart()
    assert res["failed"] and res["reason_code"] == "unit_held" and res["attempts"] == []
    assert host.events == []
    assert HOLD in res["msg"] and "daemon-reload" in res["msg"]


def test_status_of_a_held_unit_observes_it_and_says_a_restart_would_refuse(tmp_path):
    proc, host, *_others = make_procedure(tmp_path, [[ready()]], host=HeldHost())
    res = proc.observe_once()
    assert not res.get("failed") and res["verdict"] == "ready"
    assert res["would"].startswith("would refuse: sglang-k26-ddtree is held by on-call (%s)" % HOLD)
    assert host.events == []


def test_the_runbooks_hold_command_writes_the_drop_in_the_restart_recognises(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    with open(os.path.join(root, "docs", "runbook.md"), encoding="utf-8") as fh:
        text = fh.read()
    section = text[text.index('<a id="stop-the-automation"></a>'):text.index('<a id="alert-host"></a>')]
    hold_block = re.findall(r"```sh\n(.*?)```", section, re.S)[0]
    lines = [line.strip() for line in re.sub(r"\\\n\s*", " ", hold_block).splitlines()]
    printf = next(line for line in lines if line.startswith("printf "))
    written = tmp_path / "hold.conf"
    subprocess.run(["sh", "-c", printf.replace("> " + HOLD, "> " + str(written))], check=True)
    assert written.read_text() == systemd_unit.hold_text("sglang-k26-ddtree")
