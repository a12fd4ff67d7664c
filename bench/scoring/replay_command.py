"""A replay command's verdict on one trace (the replay contract of docs/trace-format.md:
the last non-empty stdout line is the verdict JSON)."""
import json
import shlex
import subprocess
import time

DEFAULT_CMD = "bin/sglang-ops replay {trace}"
TIMEOUT_S = 120


def run_replay(cmd, trace_path, cwd=".", timeout_s=TIMEOUT_S):
    """(verdict dict, wall seconds) of `cmd` with {trace} replaced by the quoted path; a
    command that fails or prints no verdict gives verdict "error" with its output's end."""
    start_s = time.perf_counter()
    try:
        proc = subprocess.run(cmd.format(trace=shlex.quote(trace_path)), shell=True, cwd=cwd,
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return _error("no verdict within %d s" % timeout_s), time.perf_counter() - start_s
    wall_s = time.perf_counter() - start_s
    return parse_verdict(proc.stdout, proc.stderr), wall_s


def parse_verdict(stdout, stderr=""):
    lines = [line for line in stdout.splitlines() if line.strip()]
    try:
        result = json.loads(lines[-1])
    except (IndexError, ValueError):
        return _error((stderr or stdout)[-300:])
    if not isinstance(result, dict) or "verdict" not in result:
        return _error("last line is not a verdict: %s" % lines[-1][:200])
    return result


def _error(reason):
    return {"verdict": "error", "t": None, "phase": None, "reason": reason}
