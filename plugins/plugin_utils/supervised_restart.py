"""The restart of a host whose unit runs its own supervisor (roles/sglang_service,
sglang_service_supervisor): one decider per start. The action restarts the unit once and
streams what the supervisor records (the per-start folders, module_utils/start_records.py);
the supervisor decides each start and systemd restarts the unit when that can help. The
action never stops, kills or restarts anything after that first restart.

Each start the supervisor records becomes one attempt of the run, its trace, verdict and
diagnostics copied into the run's artifacts (attempt-<n>/), so `report` and `replay` read
a supervised run like any other.
"""
import json
import os
import shlex

from ansible_collections.sglang_ops.serving.plugins.module_utils import start_records, systemd_unit
from ansible_collections.sglang_ops.serving.plugins.module_utils.durations import fmt_duration
from ansible_collections.sglang_ops.serving.plugins.module_utils.failure_classes import FAILURE_CLASSES
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.artifacts import redact_secrets

SUPERVISOR_MARK = "sglang-supervisor"
LIB_DIR = "/usr/lib/sglang-ops"
_SHOW = ("ActiveState", "SubState", "Result", "NRestarts", "ExecMainStatus", "StatusText")
_ENDED = ("ready", "stalled", "failed", "stopped", "interrupted")

# Run on the host with its python3 and the collection's module_utils the role installed.
_READ_STARTS = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.sglang_ops.serving.plugins.module_utils import start_records as s
root = sys.argv[2]
print(json.dumps({"current": s.current_name(root), "starts": s.recent_starts(root, int(sys.argv[3]))}))
"""
_READ_FILES = r"""
import json, os, sys
d = sys.argv[1]
out = {}
for rel in ["trace.jsonl", "verdict.json"] + ["diagnostics/" + n for n in sorted(os.listdir(os.path.join(d, "diagnostics")))
                                               if os.path.isdir(os.path.join(d, "diagnostics"))]:
    try:
        with open(os.path.join(d, rel), encoding="utf-8", errors="replace") as fh:
            out[rel] = fh.read()
    except OSError as e:
        out[rel] = None
print(json.dumps(out))
"""


def is_supervised(exec_start):
    """Whether the unit's ExecStart (the probe's unit_state.exec_start) runs the supervisor."""
    return SUPERVISOR_MARK in (exec_start or "")


def read_cmd(unit, starts_dir=start_records.DEFAULT_ROOT, limit=20):
    q = shlex.quote(systemd_unit.service_name(unit))
    return "systemctl show --property=%s -- %s; echo '---'; python3 -I -c %s %s %s %d" % (
        ",".join(_SHOW), q, shlex.quote(_READ_STARTS), shlex.quote(LIB_DIR), shlex.quote(starts_dir), limit)


def parse_read(out):
    """(unit properties, {"current", "starts"}) from read_cmd's output; ValueError."""
    show, sep, rest = out.partition("---\n")
    if not sep:
        raise ValueError("no start records in the answer: %s" % out.strip()[-200:])
    return systemd_unit.parse_properties(show), json.loads(rest.strip().splitlines()[-1])


def files_cmd(start_dir):
    return "python3 -I -c %s %s" % (shlex.quote(_READ_FILES), shlex.quote(start_dir))


def restart_cmd(unit):
    """One restart, not waited for (a Type=notify start returns only at READY=1)."""
    q = shlex.quote(systemd_unit.service_name(unit))
    return "systemctl reset-failed -- %s 2>/dev/null; systemctl restart --no-block -- %s" % (q, q)


def unit_gave_up(props):
    """systemd will not start the unit again by itself: failed, or stopped with no restart pending."""
    return props.get("ActiveState") == "failed" or (
        props.get("ActiveState") == "inactive" and props.get("SubState") != "auto-restart")


def verdict_words(record):
    code = record.get("reason_code")
    title = FAILURE_CLASSES[code].title if code in FAILURE_CLASSES else code
    return "%s in %s after %.0f s: %s (%s)" % (
        str(record.get("verdict", "")).upper(), record.get("phase"),
        _elapsed_s(record), title, record.get("reason") or "")


def start_summary(record):
    """One line per start for `status`: when, outcome, how long each phase took, why."""
    when = os.path.basename(record.get("dir") or "?")
    verdict = record.get("verdict")
    phases = ", ".join("%s %s" % (p, fmt_duration(s)) for p, s in (record.get("phase_durations") or {}).items())
    if verdict == "ready":
        words = "ready after %s" % fmt_duration(record.get("ready_after_s"))
        if record.get("reason_code") not in (None, "ready"):
            words += ", then %s (exit %s): %s" % (record.get("reason_code"), record.get("exit_code"), record.get("reason"))
    elif verdict == "running":
        words = "running: %s" % (record.get("progress") or record.get("phase"))
    else:
        words = "%s in %s after %s: %s%s: %s" % (
            verdict, record.get("phase"), fmt_duration(_elapsed_s(record)), record.get("reason_code"),
            "" if record.get("exit_code") is None else " (exit %s)" % record.get("exit_code"), record.get("reason") or "")
    return "%s  %s%s" % (when, words, "  [%s]" % phases if phases else "")


def _elapsed_s(record):
    started, ended = record.get("started_at"), record.get("ended_at")
    if record.get("ready_after_s") is not None and record.get("verdict") == "ready":
        return float(record["ready_after_s"])
    if isinstance(started, (int, float)) and isinstance(ended, (int, float)):
        return max(0.0, ended - started)
    return 0.0


class SupervisedRestart:
    """Restart once, then follow the supervisor's starts until one is ready or systemd
    leaves the unit failed. shell(cmd, timeout_s) -> (rc, out, err); emit(text);
    artifacts: RunArtifacts."""

    def __init__(self, unit, shell, emit, clock, sleep, artifacts, poll_s, start_timeout_s,
                 starts_dir=start_records.DEFAULT_ROOT):
        self.unit, self.shell, self.emit, self.clock, self.sleep = unit, shell, emit, clock, sleep
        self.artifacts, self.poll_s, self.start_timeout_s = artifacts, poll_s, start_timeout_s
        self.starts_dir = starts_dir
        self.attempts = []

    def _read(self):
        rc, out, err = self.shell(read_cmd(self.unit, self.starts_dir), 60)
        if rc != 0:
            raise RuntimeError("reading the unit's start records failed (rc %s): %s" % (rc, (err or out).strip()[-300:]))
        return parse_read(out)

    def _copy(self, n, record):
        """The start's trace, verdict and diagnostics into attempt-<n>/ of the run."""
        rc, out, dummy_err = self.shell(files_cmd(record["dir"]), 120)
        files = json.loads(out) if rc == 0 and out.strip() else {}
        trace = files.pop("trace.jsonl", None)
        if trace:
            path = self.artifacts.abspath(self.artifacts.trace_relpath(n))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(redact_secrets(trace))
        for rel, text in files.items():
            if rel.startswith("diagnostics/") and text is not None:
                self.artifacts.write_diagnostic(n, rel[len("diagnostics/"):].rsplit(".", 1)[0], text)
        return self.artifacts.diagnostics_relpath(n) if any(r.startswith("diagnostics/") for r in files) else None

    def _attempt(self, n, record, action):
        return {"n": n, "trace": self.artifacts.trace_relpath(n), "verdict": record.get("verdict"),
                "phase": record.get("phase"), "reason_code": record.get("reason_code"),
                "reason": record.get("reason") or "", "t": round(_elapsed_s(record), 3), "polls": record.get("polls"),
                "started_epoch_s": record.get("started_at"), "exit_code": record.get("exit_code"),
                "phase_durations": record.get("phase_durations") or {}, "host_dir": record.get("dir"),
                "decided_by": "supervisor", "action": action}

    def run(self):
        """{"outcome": ready | gave_up | timeout, "attempts": [...], "last": record or None, "props": {}}."""
        dummy_props, before = self._read()
        known = {s["dir"] for s in before["starts"]}
        rc, dummy_out, err = self.shell(restart_cmd(self.unit), 120)
        if rc != 0:
            raise RuntimeError("systemctl restart failed (rc %s): %s" % (rc, (err or "").strip()[-300:]))
        self.emit("restarted %s; its supervisor watches the start (progress every %.0f s)" % (self.unit, self.poll_s))
        began, shown, done = self.clock(), {}, []
        while True:
            props, state = self._read()
            new = [s for s in reversed(state["starts"]) if s["dir"] not in known]   # oldest first
            for record in new:
                n = [s["dir"] for s in new].index(record["dir"]) + 1
                if record["dir"] in done:
                    continue
                if record.get("verdict") in _ENDED:
                    done.append(record["dir"])
                    ready = record["verdict"] == "ready"
                    later = len(new) > n
                    action = "ready" if ready else ("restarted by systemd" if later or not unit_gave_up(props)
                                                    else "handed_over")
                    attempt = self._attempt(n, record, action)
                    attempt["diagnostics"] = self._copy(n, record)
                    self.attempts.append(attempt)
                    self.emit("start %d: %s" % (n, verdict_words(record)))
                    if ready:
                        return {"outcome": "ready", "attempts": self.attempts, "last": record, "props": props}
                elif record.get("progress") and shown.get(record["dir"]) != record["progress"]:
                    shown[record["dir"]] = record["progress"]
                    self.emit("start %d: %s" % (n, record["progress"]))
            if done and len(done) == len(new) and unit_gave_up(props):
                last = next(s for s in new if s["dir"] == done[-1])
                self.attempts[-1]["action"] = "handed_over"
                return {"outcome": "gave_up", "attempts": self.attempts, "last": last, "props": props}
            if self.clock() - began >= self.start_timeout_s:
                return {"outcome": "timeout", "attempts": self.attempts, "last": new[-1] if new else None,
                        "props": props}
            self.sleep(self.poll_s)
