"""bin/system-packages installs the Debian packages the two commands need, only those
missing; .ci/run runs exactly the README's test command, so CI sets up nothing a user's
machine would not."""
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bin" / "system-packages"
PACKAGES = ["make", "podman", "runc", "debootstrap", "prometheus", "haproxy", "python3-venv"]


def stub(folder, name, body):
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def machine(tmp_path):
    """A PATH whose id, dpkg-query, apt-get and python3 are stand-ins: dpkg-query knows
    the packages in $INSTALLED, apt-get records each call in calls.log."""
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    stub(stubs, "id", 'echo "$FAKE_UID"\n')
    stub(stubs, "dpkg-query", 'for package; do :; done\n'   # the last argument
                              'for p in $INSTALLED; do [ "$p" = "$package" ] && { printf "install ok installed"; exit 0; }; done\n'
                              'exit 1\n')
    stub(stubs, "apt-get", 'echo "$*" >> "%s"\n' % (tmp_path / "calls.log"))
    stub(stubs, "python3", "exit 1\n")   # no ensurepip: python3-venv decides

    def run(installed, uid=0):
        env = {"PATH": "%s:/usr/bin:/bin" % stubs, "INSTALLED": " ".join(installed), "FAKE_UID": str(uid)}
        proc = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
        log = tmp_path / "calls.log"
        return proc, log.read_text().splitlines() if log.exists() else []
    return run


def test_the_list_is_what_the_two_commands_need():
    listed = subprocess.run([str(SCRIPT), "--list"], capture_output=True, text=True, check=True).stdout.split()
    assert listed == PACKAGES


def test_as_root_it_updates_once_then_installs_only_the_missing_packages(machine):
    proc, calls = machine(["make", "podman", "runc", "debootstrap"])
    assert proc.returncode == 0, proc.stderr
    assert calls == ["update -qq", "install -y -qq prometheus haproxy python3-venv"]


def test_with_everything_installed_it_runs_no_apt_get(machine):
    proc, calls = machine(PACKAGES)
    assert (proc.returncode, calls, proc.stdout, proc.stderr) == (0, [], "", "")


def test_as_a_normal_user_it_stops_with_one_line_naming_the_missing_packages(machine):
    proc, calls = machine(["make", "podman", "runc", "debootstrap", "python3-venv"], uid=1000)
    assert proc.returncode == 1 and calls == []
    assert proc.stderr.splitlines() == [
        "missing system packages: prometheus haproxy; install them as root (apt-get install prometheus haproxy)"
        " or run make as root"]


def test_every_target_that_runs_system_tools_installs_them_first():
    makefile = (ROOT / "Makefile").read_text()
    for target in ("test", "demo", "molecule", "alerts", "image"):
        prerequisites = re.search(r"^%s:(.*)$" % target, makefile, re.M).group(1).split()
        assert prerequisites[0] == "system-packages", target
    assert re.search(r"^system-packages:\n\t@?bin/system-packages$", makefile, re.M)


def readme_test_command():
    tests_section = (ROOT / "README.md").read_text().split("\n## Testing\n", 1)[1]
    return re.search(r"```\n(.+?)\n```", tests_section, re.S).group(1).strip()


def run_ci(tmp_path, make_body):
    """.ci/run with make, apt-get and dpkg-query as stand-ins that record their calls."""
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    calls = tmp_path / "calls.log"
    for name in ("apt-get", "dpkg-query"):
        stub(stubs, name, 'echo "%s $*" >> "%s"\n' % (name, calls))
    stub(stubs, "make", 'echo "make $*" >> "%s"\n%s' % (calls, make_body))
    env = {"PATH": "%s:/usr/bin:/bin" % stubs, "HOME": str(tmp_path)}
    proc = subprocess.run([str(ROOT / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60)
    return proc, calls.read_text().splitlines()


def test_ci_runs_the_readmes_test_command_and_nothing_else(tmp_path):
    proc, calls = run_ci(tmp_path, "exit 0\n")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert calls == [readme_test_command()] == ["make test"]


def test_a_failed_ci_run_ends_with_the_lines_that_name_what_failed(tmp_path):
    proc, calls = run_ci(tmp_path, 'echo "FAILED tests/unit/x.py::test_y"; echo "lots of output"; exit 2\n')
    assert proc.returncode == 2 and calls == ["make test"]
    tail = proc.stdout.splitlines()[-3:]
    assert tail[0] == "[ci] make test failed (exit 2); what failed:"
    assert tail[1] == "FAILED tests/unit/x.py::test_y"
