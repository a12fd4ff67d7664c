"""A server's place in an HAProxy backend through the runtime API (the `stats socket` of
HAProxy's global section, `level admin`): its state read with `show servers state` (the
forced admin flags) and `show stat` (status text and current sessions), each parsed by its
header line, and set with `set server BACKEND/SERVER state ready|drain|maint`.

The socket is a unix socket path or HOST:PORT of a TCP stats socket ([ADDR]:PORT for IPv6).
HAProxy answers one command per connection and closes it."""
import csv
import socket

STATES = ("ready", "drain", "maint")
# srv_admin_state bits (HAProxy's SRV_ADMF_*): what `set server ... state` forces.
FORCED_MAINT = 0x01
FORCED_DRAIN = 0x08


class RuntimeApiError(Exception):
    """One line saying what went wrong, for the module to fail with."""


def parse_address(text):
    """(family, address) of a unix socket path or HOST:PORT."""
    if text.startswith("/") or ":" not in text:
        return socket.AF_UNIX, text
    host, port = text.rsplit(":", 1)
    family = socket.AF_INET
    if host.startswith("[") and host.endswith("]"):
        host, family = host[1:-1], socket.AF_INET6
    try:
        return family, (host, int(port))
    except ValueError:
        raise RuntimeApiError("socket %r is neither a unix socket path nor HOST:PORT" % text)


def command(address, text, timeout_s=5.0):
    """HAProxy's answer to one runtime API command."""
    family, addr = parse_address(address)
    try:
        with socket.socket(family, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout_s)
            conn.connect(addr)
            conn.sendall(text.encode() + b"\n")
            chunks = []
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                chunks.append(data)
    except socket.timeout:
        raise RuntimeApiError("the HAProxy runtime API at %s did not answer %r within %s s" % (address, text, timeout_s))
    except OSError as e:
        raise RuntimeApiError("cannot reach the HAProxy runtime API at %s: %s" % (address, e.strerror or e))
    return b"".join(chunks).decode("utf-8", "replace")


def parse_servers_state(text):
    """Rows of `show servers state` (a version line, then `# name name ...`, then rows) as dicts."""
    header, rows = None, []
    for line in text.splitlines():
        if line.startswith("# "):
            header = line[2:].split()
        elif header and line.strip():
            rows.append(dict(zip(header, line.split())))
    return rows


def parse_stat(text):
    """Rows of `show stat` (CSV, header `# pxname,svname,...`) as dicts."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not lines[0].startswith("# "):
        return []
    lines[0] = lines[0][2:]
    return list(csv.DictReader(lines))


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _refused(answer, what):
    first = answer.strip().splitlines()[0] if answer.strip() else ""
    if first.startswith("Permission denied"):
        return "HAProxy refused %s: Permission denied (the stats socket needs `level admin`)" % what
    return "HAProxy refused %s: %s" % (what, first)


def server_state(address, backend, server, timeout_s=5.0):
    """{"state": ready|drain|maint (the forced admin state), "status": show stat's status
    ("UP", "DRAIN", "MAINT", "DOWN", "no check", ...), "sessions": current sessions,
    "queued": requests queued for it}."""
    answer = command(address, "show servers state %s" % backend, timeout_s)
    rows = parse_servers_state(answer)
    if not rows and not answer.startswith("1"):
        raise RuntimeApiError("HAProxy at %s has no backend %r (%s)" % (address, backend, answer.strip() or "no answer"))
    row = next((r for r in rows if r.get("be_name") == backend and r.get("srv_name") == server), None)
    if row is None:
        raise RuntimeApiError("HAProxy backend %r has no server %r (it has: %s)"
                              % (backend, server, ", ".join(r.get("srv_name", "?") for r in rows) or "none"))
    admin = _int(row.get("srv_admin_state"))
    if admin is None:
        raise RuntimeApiError("HAProxy's show servers state has no srv_admin_state for %s/%s" % (backend, server))
    state = "maint" if admin & FORCED_MAINT else "drain" if admin & FORCED_DRAIN else "ready"
    stat = next((r for r in parse_stat(command(address, "show stat", timeout_s))
                 if r.get("pxname") == backend and r.get("svname") == server), {})
    return {"state": state, "status": stat.get("status"), "sessions": _int(stat.get("scur")),
            "queued": _int(stat.get("qcur"))}


def set_server_state(address, backend, server, state, check_mode=False, timeout_s=5.0):
    """Put the server in `state` unless it is there: the server's state afterwards with
    "changed" and "previous_state"."""
    if state not in STATES:
        raise RuntimeApiError("state must be one of %s, not %r" % (", ".join(STATES), state))
    before = server_state(address, backend, server, timeout_s)
    if before["state"] == state:
        return dict(before, changed=False, previous_state=state)
    if check_mode:
        return dict(before, state=state, changed=True, previous_state=before["state"])
    what = "set server %s/%s state %s" % (backend, server, state)
    answer = command(address, what, timeout_s)
    if answer.strip():
        raise RuntimeApiError(_refused(answer, what))
    after = server_state(address, backend, server, timeout_s)
    if after["state"] != state:
        raise RuntimeApiError("%s was accepted but the server reads %s" % (what, after["state"]))
    return dict(after, changed=True, previous_state=before["state"])
