import os
import stat
import subprocess
import sys
import textwrap

import pytest

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def data(name):
    with open(os.path.join(DATA, name)) as f:
        return f.read()


@pytest.fixture
def script_dir(tmp_path):
    """A folder for fake executables; returns a function (name, body) -> path."""
    def make(name, body):
        path = tmp_path / name
        path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        return str(path)
    return make


@pytest.fixture
def child(tmp_path):
    """Start a python child running `code`; killed at the end of the test."""
    procs = []

    def start(code, *args):
        p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)] + list(args),
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        procs.append(p)
        return p
    yield start
    for p in procs:
        if p.poll() is None:
            try:
                os.kill(p.pid, 18)  # SIGCONT, so a stopped child can die
            except ProcessLookupError:
                pass
            p.kill()
        p.wait()
