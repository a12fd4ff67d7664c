"""Testinfra helpers shared by the Molecule scenarios (on PYTHONPATH via the base config)."""
from __future__ import annotations

import json
import time

READY_TIMEOUT_S = 120.0
POLL_S = 1.0


def journal(host, unit: str, lines: int = 200) -> str:
    """The unit's recent journal, for assertion messages."""
    out = host.run(f"journalctl -u {unit} --no-pager -n {lines} -o short-precise")
    return f"\n--- journal of {unit} ---\n{out.stdout}{out.stderr}"


def http_status(host, url: str) -> int | None:
    """HTTP status of a GET from inside the host, None while nothing answers."""
    out = host.run(f"curl -s -o /dev/null -w '%{{http_code}}' --max-time 5 {url}")
    code = out.stdout.strip()
    return int(code) if code.isdigit() and code != "000" else None


def wait_ready(host, unit: str, port: int, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Wait (bounded) until /health answers 200; fail with the journal otherwise."""
    deadline = time.monotonic() + timeout_s
    status = None
    while time.monotonic() < deadline:
        status = http_status(host, f"http://127.0.0.1:{port}/health")
        if status == 200:
            return
        state = host.run(f"systemctl is-active {unit}").stdout.strip()
        if state in ("inactive", "failed"):
            raise AssertionError(f"{unit} is {state}, not starting" + journal(host, unit))
        time.sleep(POLL_S)
    raise AssertionError(
        f"{unit} not ready on port {port} after {timeout_s:.0f} s "
        f"(last /health status: {status})" + journal(host, unit))


def post_json(host, url: str, body: dict, headers: dict | None = None) -> tuple[int, dict]:
    """POST a JSON body from inside the host; returns (status, parsed body)."""
    args = " ".join(f"-H '{k}: {v}'" for k, v in (headers or {}).items())
    payload = json.dumps(body).replace("'", "'\\''")
    out = host.run(
        f"curl -s --max-time 30 -w '\\n%{{http_code}}' -H 'Content-Type: application/json' "
        f"{args} -d '{payload}' {url}")
    text, _, code = out.stdout.rpartition("\n")
    try:
        parsed = json.loads(text) if text else {}
    except ValueError:
        parsed = {"unparsed": text}
    return (int(code) if code.isdigit() else 0), parsed
