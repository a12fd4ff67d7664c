"""A failed upgrade removes what it made for the new release (playbooks/tasks/
upgrade_remove_new.yml): run on this machine against real folders, it removes the new
venv and caches' folder that did not exist before the upgrade, and keeps what existed
before it and the venv the host runs."""
import json
import subprocess
import sys

from conftest import ANSIBLE_PLAYBOOK, ROOT, ansible_env

PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: %(python)s
  tasks:
    - name: Look at the paths before the install, as upgrade.yml does
      ansible.builtin.stat:
        path: "{{ item }}"
        follow: false
        get_checksum: false
      loop: "{{ new_paths }}"
      register: before

    - name: Make them, as a half-done install would
      ansible.builtin.file:
        path: "{{ item }}/bin"
        state: directory
        mode: "0755"
      loop: "{{ new_paths + [from_venv] }}"

    - name: Remove what the upgrade made
      ansible.builtin.include_tasks: %(tasks)s
      vars:
        sglang_upgrade_new: "{{ before.results }}"
        sglang_upgrade_from_venv: "{{ from_venv }}"

    - name: Say what was removed
      ansible.builtin.copy:
        content: "{{ sglang_upgrade_removed_words }}"
        dest: "{{ out }}"
        mode: "0644"
"""


def run_removal(tmp_path, new_paths, from_venv):
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAY % {"python": sys.executable, "tasks": ROOT / "playbooks" / "tasks" / "upgrade_remove_new.yml"})
    out = tmp_path / "removed.txt"
    run = subprocess.run([str(ANSIBLE_PLAYBOOK), "-i", "localhost,", str(playbook), "-e",
                          json.dumps({"new_paths": [str(p) for p in new_paths], "from_venv": str(from_venv), "out": str(out)})],
                         env=ansible_env(), capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    return out.read_text()


def test_what_the_upgrade_made_is_removed_and_nothing_else(tmp_path):
    venv, caches = tmp_path / "venvs" / "0.5.24", tmp_path / "cache" / "0.5.24"
    kept_caches = tmp_path / "cache-kept" / "0.5.24"
    (kept_caches / "triton").mkdir(parents=True)      # warm caches of an earlier try, not this upgrade's
    running = tmp_path / "venvs" / "0.5.23"
    words = run_removal(tmp_path, [venv, caches, kept_caches], running)
    assert not venv.exists() and not caches.exists()
    assert (kept_caches / "triton").is_dir() and running.is_dir()
    assert words == "the new release's %s and %s removed" % (venv, caches)


def test_the_venv_the_host_runs_is_never_removed(tmp_path):
    running = tmp_path / "venvs" / "0.5.23"
    words = run_removal(tmp_path, [running], running)
    assert (running / "bin").is_dir()
    assert words == ""
