"""systemd's notify protocol (sd_notify(3)) in the standard library: one datagram per
message to $NOTIFY_SOCKET. Without that variable (not started by systemd as
Type=notify) every send is a no-op, so the supervisor also runs by hand."""
import os
import socket


class Notifier:
    def __init__(self, address=None):
        address = address if address is not None else os.environ.get("NOTIFY_SOCKET", "")
        if address.startswith("@"):
            address = "\0" + address[1:]       # abstract namespace
        self.address = address or None
        self.sent = 0

    @property
    def enabled(self):
        return self.address is not None

    def send(self, **fields):
        """send(STATUS="...", EXTEND_TIMEOUT_USEC=600000000); True when delivered."""
        if not self.enabled or not fields:
            return False
        text = "\n".join("%s=%s" % (k, str(v).replace("\n", " ")) for k, v in fields.items())
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.sendto(text.encode("utf-8", "replace"), self.address)
        except OSError:
            return False   # systemd gone or the socket refused: nothing to tell
        self.sent += 1
        return True

    def status(self, line):
        return self.send(STATUS=line)

    def extend_timeout(self, seconds):
        return self.send(EXTEND_TIMEOUT_USEC=int(seconds * 1e6))

    def ready(self, line):
        return self.send(READY=1, STATUS=line)

    def watchdog(self):
        return self.send(WATCHDOG=1)

    def stopping(self, line):
        return self.send(STOPPING=1, STATUS=line)
