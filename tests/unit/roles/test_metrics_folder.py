"""roles/sglang_metrics names its folder when a metrics file cannot be written there: a full
file system, a read-only mount. Runs the role with ansible-playbook on this machine, the
folder on a tmpfs of its own (mounting one needs root)."""
import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import ANSIBLE_PLAYBOOK, ansible_env, failures_by_host, write_inventory

PLAYBOOK = Path(__file__).parent / "metrics_role.yml"


def run_role(tmp_path, textfile_dir, *options, **variables):
    host = dict({"sglang_metrics_textfile_dir": textfile_dir, "sglang_metrics_node_exporter": False,
                 "sglang_metrics_writer_group": "root"}, **variables)
    inventory = write_inventory(tempfile.mkdtemp(dir=tmp_path, prefix="inv-"), {"metrics-host": host})
    run = subprocess.run([str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(PLAYBOOK), *options],
                         env=ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json"),
                         capture_output=True, text=True, check=False)
    result = json.loads(run.stdout[run.stdout.index("{"):])
    return run.returncode, [message for _, _, message in failures_by_host(result).get("metrics-host", [])]


def fill(folder):
    """Write into `folder` until its file system is full."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        with pytest.raises(OSError, match="No space left"):
            while True:
                os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)


@pytest.fixture
def tmpfs(tmp_path):
    """mount(options) -> a tmpfs folder, unmounted after the test."""
    mounted = []

    def mount(options):
        where = tmp_path / ("fs%d" % len(mounted))
        where.mkdir()
        run = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                             capture_output=True, text=True, check=False)
        if run.returncode != 0:
            pytest.skip("cannot mount a tmpfs here: " + run.stderr.strip())
        mounted.append(where)
        return where
    yield mount
    for where in reversed(mounted):
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_writable_folder_passes_and_keeps_no_trace_of_the_check(tmp_path):
    folder = tmp_path / "textfile"
    returncode, failed = run_role(tmp_path, str(folder))
    assert (returncode, failed) == (0, [])
    assert folder.is_dir() and os.listdir(folder) == []


def test_a_full_file_system_is_named_with_the_folder(tmp_path, tmpfs):
    folder = tmpfs("size=256k,mode=0755") / "textfile"
    folder.mkdir(mode=0o755)
    fill(folder.parent)
    returncode, failed = run_role(tmp_path, str(folder))
    assert returncode == 2
    assert failed == ["sglang_metrics: cannot write the metrics file in sglang_metrics_textfile_dir %s on metrics-host: "
                      "No space left on device (0 KiB free to users other than root, 64 KiB needed); the restart and "
                      "the unit's supervisor write sglang_ops_<unit>.prom there every poll (free space there, or point "
                      "sglang_metrics_textfile_dir elsewhere)." % folder]


def test_a_read_only_folder_is_named_with_the_error(tmp_path, tmpfs):
    where = tmpfs("size=1m,mode=0755")
    (where / "textfile").mkdir(mode=0o755)
    subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)
    returncode, failed = run_role(tmp_path, str(where / "textfile"))
    assert returncode == 2
    (message,) = failed
    assert message.startswith("sglang_metrics: cannot write the metrics file in sglang_metrics_textfile_dir %s on "
                              "metrics-host: " % (where / "textfile")), message
    assert "Read-only file system" in message, message


def test_check_mode_reads_the_free_space_and_writes_nothing(tmp_path, tmpfs):
    absent = tmp_path / "not-yet"
    assert run_role(tmp_path, str(absent), "--check") == (0, [])
    assert not absent.exists()
    full = tmpfs("size=64k,mode=0755")
    fill(full)
    returncode, failed = run_role(tmp_path, str(full), "--check")
    assert returncode == 2 and "No space left on device (0 KiB free" in failed[0], failed


@pytest.mark.parametrize("variables, message", [
    ({"sglang_metrics_textfile_dir": "/var/lib/prometheus/node-exporter\n"},
     'sglang_metrics_textfile_dir must be an absolute path of letters, digits and -_./, '
     'got "/var/lib/prometheus/node-exporter\\n"'),
    ({"sglang_metrics_node_exporter": "false"},
     'sglang_metrics: sglang_metrics_node_exporter must be true or false, unquoted, got "false" (a string)'),
])
def test_bad_variables_are_named_before_any_change(tmp_path, variables, message):
    returncode, failed = run_role(tmp_path, str(tmp_path / "unused"), **variables)
    assert returncode == 2
    (text,) = failed
    assert text.startswith(message), text
    assert not (tmp_path / "unused").exists()
