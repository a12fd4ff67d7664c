"""Whether a TCP address answers: the probe's reading of where the nodes of a server over several
hosts meet (`--dist-init-addr`, node 0's torch store). One connect with a short timeout, nothing sent."""
import socket

CONNECT_TIMEOUT_S = 2.0


def split_addr(addr):
    """("host", port) of "host:port" or "[v6]:port"; None when it is not one."""
    host, sep, port = (addr or "").rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host, int(port)


def connect_state(addr, timeout_s=CONNECT_TIMEOUT_S):
    """"open" (something listens), "refused", "timeout" (no answer within timeout_s), or
    "unreachable" (no route, a name that does not resolve, not an address)."""
    parts = split_addr(addr)
    if parts is None:
        return "unreachable"
    try:
        with socket.create_connection(parts, timeout=timeout_s):
            return "open"
    except ConnectionRefusedError:
        return "refused"
    except socket.timeout:
        return "timeout"
    except OSError:
        return "unreachable"
