import os
import stat
import subprocess
import sys
import textwrap
import threading
from http.server import ThreadingHTTPServer

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


class LoopbackHTTP:
    """A real HTTP server on a loopback port the kernel hands out, serving `handler` (a
    BaseHTTPRequestHandler class) from a thread until close()."""

    def __init__(self, handler):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def closing():
    """Returns a function that hands back what it is given and closes it after the test."""
    made = []

    def keep(server):
        made.append(server)
        return server
    yield keep
    for server in made:
        server.close()
