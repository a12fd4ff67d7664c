"""A real HAProxy (Debian's 2.6 package) in front of two local HTTP servers, with its runtime
API on a unix socket and a TCP socket at `level admin`, and a unix socket at `level user`."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
BACKEND = "sglang"
SERVERS = ("gpu-a", "gpu-b")

NO_HAPROXY = pytest.mark.skipif(not os.path.exists(HAPROXY), reason="haproxy is not installed (apt-get install haproxy)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Replica:
    """An HTTP server standing for one replica; GET /slow answers after `slow_s`."""

    def __init__(self):
        self.slow_s = 2.0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                if self.path == "/slow":
                    time.sleep(outer.slow_s)
                body = b"ok\n"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class HAProxy:
    def __init__(self, directory):
        self.dir = directory
        self.admin_socket = os.path.join(directory, "admin.sock")
        self.user_socket = os.path.join(directory, "user.sock")
        self.backend, self.servers = BACKEND, SERVERS
        self.replicas = [_Replica() for name in SERVERS]
        self.config = os.path.join(directory, "haproxy.cfg")
        # A free port is free only when asked: on a busy machine another process may bind it
        # before haproxy does, so a start that lost its port is tried again with new ones.
        for attempt in range(5):
            if self._start() or "Address already in use" not in self._log_text():
                break
        if not self._answers():
            raise AssertionError("haproxy did not start: " + self._log_text())

    def _start(self):
        """Write the config on new ports and start haproxy; True once its admin socket answers."""
        self.tcp_socket = "127.0.0.1:%d" % free_port()
        self.frontend_port = free_port()
        servers = "\n".join("    server %s 127.0.0.1:%d" % (name, r.port) for name, r in zip(SERVERS, self.replicas))
        with open(self.config, "w") as f:
            f.write("""global
    stats socket %s level admin
    stats socket %s level user
    stats socket ipv4@%s level admin
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
frontend api
    bind 127.0.0.1:%d
    default_backend %s
backend %s
%s
""" % (self.admin_socket, self.user_socket, self.tcp_socket, self.frontend_port, BACKEND, BACKEND, servers))
        self.log = open(os.path.join(self.dir, "haproxy.log"), "wb")
        self.proc = subprocess.Popen([HAPROXY, "-db", "-f", self.config], stdout=self.log, stderr=self.log,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        end = time.monotonic() + 10
        while not self._answers():
            if self.proc.poll() is not None or time.monotonic() > end:
                return False
            time.sleep(0.05)
        return True

    def _log_text(self):
        with open(self.log.name, encoding="utf-8", errors="replace") as f:
            return f.read()

    def _answers(self):
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(self.admin_socket)
            return True
        except OSError:
            return False

    def run(self, command):
        """The runtime API's answer, straight from the socket (the tests' own view)."""
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(self.admin_socket)
            s.sendall(command.encode() + b"\n")
            out = b""
            while True:
                data = s.recv(65536)
                if not data:
                    return out.decode()
                out += data

    def status(self, server):
        """show stat's status column of the server, found by the header."""
        lines = self.run("show stat").splitlines()
        header = lines[0][2:].split(",")
        for line in lines[1:]:
            row = dict(zip(header, line.split(",")))
            if row.get("pxname") == BACKEND and row.get("svname") == server:
                return row["status"]
        raise AssertionError("no %s/%s in show stat" % (BACKEND, server))

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait(timeout=5)
        self.log.close()
        for r in self.replicas:
            r.close()


@pytest.fixture
def haproxy():
    # unix socket paths must stay under 108 bytes: a short folder of its own
    directory = tempfile.mkdtemp(prefix="hap-")
    proxy = HAProxy(directory)
    yield proxy
    proxy.stop()
    shutil.rmtree(directory, ignore_errors=True)
