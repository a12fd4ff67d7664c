"""Ctrl-C reaches the restart action through a real ansible-playbook: the worker turns it
into RunInterrupted (instead of dying in the middle of a step), still runs a remote step
(the lock release) and ignores the SIGTERM the controller sends its workers right after."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def wait_for(path, timeout_s=30):
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_ctrl_c_to_ansible_playbook_is_recorded_by_the_action(tmp_path):
    marker = str(tmp_path / "run")
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        "- hosts: all\n  gather_facts: false\n  tasks:\n"
        "    - name: Watch\n      interruptible_wait:\n        marker: %s\n" % marker)
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"),
               ANSIBLE_ACTION_PLUGINS=str(FIXTURES / "action_plugins"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0")
    play = subprocess.Popen(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "local,", "-c", "local",
         "-e", "ansible_python_interpreter=%s" % sys.executable, str(playbook)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        assert wait_for(marker + ".waiting"), play.communicate(timeout=5)[0] if play.poll() is not None else "no start"
        os.killpg(play.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
        out, _ = play.communicate(timeout=60)
    finally:
        if play.poll() is None:
            os.killpg(play.pid, signal.SIGKILL)
    assert play.returncode != 0, out
    assert wait_for(marker + ".released", 30), (out, sorted(os.listdir(tmp_path)), [
        Path(tmp_path, n).read_text() for n in sorted(os.listdir(tmp_path)) if n.startswith("run.")])
    assert Path(marker + ".interrupted").read_text() == "interrupted by SIGINT\n"
    assert Path(marker + ".released").read_text() == "released\n"
