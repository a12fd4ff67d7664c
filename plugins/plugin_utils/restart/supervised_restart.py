"""The restart of a host whose unit runs its own supervisor (roles/sglang_service,
sglang_service_supervisor): one decider per start. The action restarts the unit once and
streams what the supervisor records (the per-start folders, module_utils/records/start_records.py);
the supervisor decides each start and systemd restarts the unit when that can help. The
action never stops, kills or restarts anything after that first restart, but for one thing:
beside the weight cache daemon, after_failed_start may make the next start cold
(weight_cache_step; at most once per run).

Each start the supervisor records becomes one attempt of the run, its trace, verdict and
diagnostics copied into the run's artifacts (attempt-<n>/), so `report` and `replay` read
a supervised run like any other. The run's time to ready compares the last start with the
host's earlier ready starts, as the supervisor recorded them (their phase durations), the
same comparison the playbook's own watch makes (start_outlook.time_to_ready).
"""
import os

from ansible_collections.sglang_ops.serving.plugins.module_utils.records import start_records
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.inert_text import inert
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.durations import fmt_duration
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.failure_classes import FAILURE_CLASSES
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.phases import phase_rank
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.start_outlook import start_time_to_ready
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared.artifacts import redact_secrets

RECENT_STARTS = 20      # start records read each poll: more than a run's starts
_ENDED = ("ready", "stalled", "failed", "stopped", "interrupted")


def unit_gave_up(state):
    """systemd will not start the unit again by itself: failed, or stopped with no restart
    pending. state: the probe's unit_state."""
    return state.get("active") == "failed" or (state.get("active") == "inactive" and state.get("sub") != "auto-restart")


def verdict_words(record):
    code = record.get("reason_code")
    title = FAILURE_CLASSES[code].title if code in FAILURE_CLASSES else code
    return "%s in %s after %.0f s: %s (%s)" % (
        str(record.get("verdict", "")).upper(), record.get("phase"),
        _elapsed_s(record), title, record.get("reason") or "")


def start_summary(record):
    """One line per start for `status`: when, outcome, how long each phase took, why (inert:
    what the record held cannot break the line)."""
    when = os.path.basename(record.get("dir") or "?")
    verdict = record.get("verdict")
    durations = record.get("phase_durations") or {}
    phases = ", ".join("%s %s" % (p, fmt_duration(durations[p])) for p in sorted(durations, key=phase_rank))
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
    return inert("%s  %s%s" % (when, words, "  [%s]" % phases if phases else ""))


def _elapsed_s(record):
    started, ended = record.get("started_at"), record.get("ended_at")
    if record.get("ready_after_s") is not None and record.get("verdict") == "ready":
        return float(record["ready_after_s"])
    if isinstance(started, (int, float)) and isinstance(ended, (int, float)):
        return max(0.0, ended - started)
    return 0.0


class SupervisedRestart:
    """Restart once, then follow the supervisor's starts until one is ready or systemd
    leaves the unit failed. access: the restart's HostAccess (read, verb, emit, clock, sleep);
    artifacts: RunArtifacts."""

    def __init__(self, unit, access, artifacts, poll_s, start_timeout_s, starts_dir=start_records.DEFAULT_ROOT,
                 after_failed_start=None):
        self.unit, self.access, self.artifacts = unit, access, artifacts
        self.poll_s, self.start_timeout_s, self.starts_dir = poll_s, start_timeout_s, starts_dir
        # after_failed_start(attempt, unit_state) -> True when it restarted the unit itself (a
        # cold restart after a failed warm start, weight_cache_step); the starts that follow
        # are followed as before. None: systemd alone restarts the unit.
        self.after_failed_start = after_failed_start
        self.attempts = []
        self.seen = {}     # every start record read during the run, by folder: the history
        # attempt number of each start of this run, by folder, in the order they began: the
        # read window (RECENT_STARTS) slides, the numbers and attempt-<n>/ folders do not
        self.numbers = {}

    def _read(self):
        """(the unit's state, {"current", "starts"}) in one probe read."""
        res = self.access.read(unit_state=True, starts=RECENT_STARTS, starts_dir=self.starts_dir)
        if res.get("failed") or "unit_state" not in res or "starts" not in res:
            why = res.get("msg") or (res.get("missing") or {}).get("unit_state") or "no answer"
            raise RuntimeError("reading the unit's state and start records failed: %s" % why)
        for record in res["starts"].get("starts") or ():
            self.seen[record.get("dir")] = record
        return res["unit_state"], res["starts"]

    def _result(self, outcome, last, unit):
        return {"outcome": outcome, "attempts": self.attempts, "last": last, "unit_state": unit,
                "time_to_ready": start_time_to_ready(last, self.seen.values()) if last else None}

    def _copy(self, n, record):
        """The start's trace, verdict and diagnostics into attempt-<n>/ of the run."""
        res = self.access.read(start_files=os.path.basename(record["dir"]), starts_dir=self.starts_dir)
        files = dict(res.get("start_files") or {})
        for refused in res.get("refused") or ():   # a link or FIFO planted in the start's folder
            self.access.emit("warning: %s" % refused)
        trace = files.pop(start_records.TRACE, None)
        if trace:
            path = self.artifacts.abspath(self.artifacts.trace_relpath(n))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(redact_secrets(trace))
        prefix = start_records.DIAGNOSTICS + "/"
        for rel, text in files.items():
            if rel.startswith(prefix) and text is not None:
                self.artifacts.write_diagnostic(n, rel[len(prefix):].rsplit(".", 1)[0], text)
        return self.artifacts.diagnostics_relpath(n) if any(r.startswith(prefix) for r in files) else None

    def _attempt(self, n, record, action):
        return {"n": n, "trace": self.artifacts.trace_relpath(n), "verdict": record.get("verdict"),
                "phase": record.get("phase"), "reason_code": record.get("reason_code"),
                "reason": record.get("reason") or "", "t": round(_elapsed_s(record), 3), "polls": record.get("polls"),
                "started_epoch_s": record.get("started_at"), "exit_code": record.get("exit_code"),
                "phase_durations": record.get("phase_durations") or {}, "host_dir": record.get("dir"),
                "decided_by": "supervisor", "action": action, "observe_only": record.get("observe_only"),
                "restart_kind": record.get("restart_kind"), "restart_kind_reason": record.get("restart_kind_reason")}

    def run(self):
        """{"outcome": ready | gave_up | timeout, "attempts": [...], "last": record or None,
        "unit_state": the probe's unit_state at the end, "time_to_ready": the last start
        against the host's earlier ready starts, or None}."""
        dummy_state, before = self._read()
        known = {s["dir"] for s in before["starts"]}
        rc, dummy_out, err = self.access.verb("restart-no-block")
        if rc != 0:
            raise RuntimeError("systemctl restart failed (rc %s): %s" % (rc, (err or "").strip()[-300:]))
        self.access.emit("restarted %s; its supervisor watches the start (progress every %.0f s)" % (self.unit, self.poll_s))
        began, shown, done = self.access.clock(), {}, []
        while True:
            unit, state = self._read()
            new = [s for s in reversed(state["starts"]) if s["dir"] not in known]   # oldest first
            restarted_here = False
            for i, record in enumerate(new):
                n = self.numbers.setdefault(record["dir"], len(self.numbers) + 1)
                if record["dir"] in done:
                    continue
                if record.get("verdict") in _ENDED:
                    done.append(record["dir"])
                    ready = record["verdict"] == "ready"
                    later = i < len(new) - 1
                    action = "ready" if ready else ("restarted by systemd" if later or not unit_gave_up(unit)
                                                    else "handed_over")
                    attempt = self._attempt(n, record, action)
                    attempt["diagnostics"] = self._copy(n, record)
                    self.attempts.append(attempt)
                    self.access.emit("start %d: %s" % (n, verdict_words(record)))
                    if ready:
                        return self._result("ready", record, unit)
                    if self.after_failed_start is not None and self.after_failed_start(attempt, unit):
                        restarted_here = True
                        break
                elif (record.get("observe_only") or {}).get("words") and shown.get(("oo", record["dir"])) is None:
                    shown[("oo", record["dir"])] = True   # rule 4: said once per start, before its progress
                    self.access.emit("start %d: %s" % (n, record["observe_only"]["words"]))
                elif record.get("progress") and shown.get(record["dir"]) != record["progress"]:
                    shown[record["dir"]] = record["progress"]
                    self.access.emit("start %d: %s" % (n, record["progress"]))
            if restarted_here:   # the unit state read above is from before that restart
                self.access.sleep(self.poll_s)
                continue
            # Every start still in the read window has ended (older ones, beyond RECENT_STARTS
            # or pruned by the supervisor, were counted when they ended).
            if done and all(s["dir"] in done for s in new) and unit_gave_up(unit):
                last = next(s for s in new if s["dir"] == done[-1])
                self.attempts[-1]["action"] = "handed_over"
                return self._result("gave_up", last, unit)
            if self.access.clock() - began >= self.start_timeout_s:
                return self._result("timeout", new[-1] if new else None, unit)
            self.access.sleep(self.poll_s)
