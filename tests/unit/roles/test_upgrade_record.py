"""The record of a host's upgrade (playbooks/tasks/upgrade_record.yml): written before the
upgrade changes anything, with the stats a rollback needs, read back by the next run as
upgrade.yml reads it (slurp, then the plan filter), which resumes from the release the
record names, not from a unit file the killed run had rendered; removed when done. Run on
this machine against real files."""
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
    - name: Look at the kept file and the new venv before the upgrade, as upgrade.yml does
      ansible.builtin.stat:
        path: "{{ item }}"
        follow: false
        get_checksum: false
      loop: "{{ [unit_file, new_venv] }}"
      register: before

    - name: Write the record
      ansible.builtin.include_tasks: %(tasks)s
      vars:
        sglang_upgrade_record_state: started
        sglang_version: "0.5.24"
        sglang_upgrade_to_venv: "{{ new_venv }}"
        sglang_upgrade_from_version: "0.5.23"
        sglang_upgrade_from_venv: "{{ old_venv }}"
        sglang_upgrade_kept: "{{ before.results[:1] }}"
        sglang_upgrade_kept_links: []
        sglang_upgrade_new: "{{ before.results[1:] }}"

    - name: Read it back as the next run does
      ansible.builtin.slurp:
        src: "{{ sglang_upgrade_record_path }}"
      register: record_read

    - name: Decide as the next run does, the killed run having rendered the unit for the new release
      ansible.builtin.copy:
        content: >-
          {{ probe | sglang_ops.serving.sglang_upgrade_plan('gpu-a', '0.5.24', new_venv, {}, record_read.content | b64decode | from_json,
                                                            sglang_upgrade_record_path) | to_json }}
        dest: "{{ out }}"
        mode: "0644"
      vars:
        probe:
          unit_state: {main_pid: 41, venv: "{{ new_venv }}"}
          unit_processes: [{pid: 41, cmdline: "{{ old_venv }}/bin/python -m sglang.launch_server"}]

    - name: Keep a copy of the record as written
      ansible.builtin.copy:
        src: "{{ sglang_upgrade_record_path }}"
        dest: "{{ out }}.record"
        mode: "0644"

    - name: Remove it, the upgrade done
      ansible.builtin.include_tasks: %(tasks)s
      vars:
        sglang_upgrade_record_state: done
"""


def test_the_record_is_written_read_back_into_a_resume_and_removed(tmp_path):
    unit_file, new_venv, old_venv = tmp_path / "sglang-k26-ddtree.service", tmp_path / "venvs" / "0.5.24", tmp_path / "venvs" / "0.5.23"
    unit_file.write_text("[Service]\n")
    record_path, out = tmp_path / "upgrade" / "upgrade.json", tmp_path / "plan.json"
    record_path.parent.mkdir(mode=0o700)
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAY % {"python": sys.executable, "tasks": ROOT / "playbooks" / "tasks" / "upgrade_record.yml"})
    run = subprocess.run([str(ANSIBLE_PLAYBOOK), "-i", "localhost,", str(playbook), "-e", json.dumps({
        "unit_file": str(unit_file), "new_venv": str(new_venv), "old_venv": str(old_venv),
        "sglang_upgrade_record_path": str(record_path), "out": str(out)})],
        env=ansible_env(), capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    plan = json.loads(out.read_text())
    assert plan["action"] == "resume", plan
    assert (plan["from_version"], plan["from_venv"]) == ("0.5.23", str(old_venv))
    assert (plan["unit_venv"], plan["running_venv"]) == (str(new_venv), str(old_venv))
    record = json.loads((tmp_path / "plan.json.record").read_text())
    assert (record["to_version"], record["to_venv"], record["from_version"]) == ("0.5.24", str(new_venv), "0.5.23")
    # what a rollback needs: the kept file's stat before the change, and that the new venv did not exist
    assert [(k["item"], k["stat"]["exists"], k["stat"]["pw_name"]) for k in record["kept"]] == [(str(unit_file), True, "root")]
    assert [(n["item"], n["stat"]["exists"]) for n in record["new"]] == [(str(new_venv), False)]
    assert not record_path.exists()
