"""How one host's restart ends, and what it leaves behind: run.json finished, the task's
result and its one-line message; on a hand-over to a human, why no restart was tried and
the incident report; on an interruption, what the run was doing and that the service was
left as it was.
"""
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.durations import fmt_duration
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.failure_classes import FAILURE_CLASSES
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.inert_text import inert
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import observe_only_step
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.restart_run import counted
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared.artifacts import iso_utc, redact_secrets


def time_to_ready_words(ttr):
    """'time to ready 4m10s (usual 10m40s); slower than usual: post_load 9m00s (usual 4m00s); '."""
    if not ttr or ttr.get("ready_after_s") is None:
        return ""
    words = "time to ready %s" % fmt_duration(ttr["ready_after_s"])
    if ttr.get("history_starts"):
        words += " (usual %s)" % fmt_duration(ttr["usual_total_s"])
    slow = ["%s %s (usual %s)" % (s["phase"], fmt_duration(s["took_s"]), fmt_duration(s["usual_s"]))
            for s in ttr.get("slower_than_usual") or ()]
    if slow:
        words += "; slower than usual: " + ", ".join(slow)
    return words + "; "


class RunEnding:
    """Ends the run of a RestartRun: finish (ready, or check mode's observation), hand_over
    (gave up: the human takes it from here, with run.json and the incident report), or
    note_interrupted (cut short from outside)."""

    def __init__(self, run):
        self.run = run

    def finish(self, outcome, phase, code, reason, failed=False, verdict=None):
        """run.json finished with outcome, and the task's result."""
        run, record = self.run, self.run.record
        record.update({"finished": iso_utc(run.access.clock()), "outcome": outcome})
        if run.outlook is not None and record["attempts"]:
            record["time_to_ready"] = run.outlook.summary()
            run.outlook.finish(outcome, code, len(record["attempts"]))
        run_json = run.artifacts.write_run(record)
        if verdict is None:
            verdict = {"ready": "ready", "check_mode": "observed"}.get(outcome, FAILURE_CLASSES[code].verdict
                                                                       if code in FAILURE_CLASSES else "failed")
        res = {"changed": run.changed, "outcome": outcome, "verdict": verdict, "phase": phase,
               "reason_code": code, "reason": redact_secrets(reason or ""),
               "attempts": record["attempts"], "artifacts": run.artifacts.path, "run_json": run_json,
               "gave_up_because": record["gave_up_because"]}
        if failed:
            res["failed"] = True
        kind_words = ""
        if record.get("restart_kind"):
            res["restart_kind"] = record["restart_kind"]
            res["restart_kind_reason"] = record["restart_kind_reason"]
            res["weight_cache"] = record.get("weight_cache")
            kind_words = "%s restart (%s); " % (res["restart_kind"], res["restart_kind_reason"])
        if outcome == "ready":
            held = observe_only_step.summary_words(record["attempts"])
            res["msg"] = inert("%s: %s ready after %s; %s%s%sartifacts: %s" % (
                run.host, run.unit_words(), counted(len(record["attempts"]), "attempt"), kind_words,
                time_to_ready_words(record.get("time_to_ready")), held + "; " if held else "",
                run.artifacts_words()))
        return res

    def hand_over(self, phase, code, reason, because=None, verdict=None):
        """Give up: the other nodes of a server told, run.json finished with why no restart
        (because), the incident report written; the failed result."""
        run = self.run
        n = len(run.record["attempts"])
        if run.server is not None:   # the other nodes stop waiting for this one
            run.server.abort(code, redact_secrets(reason))
        if because is None:
            because = "%s: %s" % (phase, code) if phase in ("preflight", "stopping") else code
        run.record["gave_up_because"] = because
        missing = _with_host(run.record["attempts"][-1].get("missing_node") if run.record["attempts"] else None, run.server)
        if missing:
            run.record["missing_node"] = missing   # a peer that never came: run.json and the report name it
        res = self.finish("gave_up", phase, code, reason, failed=True, verdict=verdict)
        title = FAILURE_CLASSES[code].title if code in FAILURE_CLASSES else code
        held = observe_only_step.summary_words(run.record["attempts"])
        kind = ("Last start %s (%s). " % (res["restart_kind"], res["restart_kind_reason"])
                if res.get("restart_kind") else "")
        if missing:
            res["missing_node"] = missing
        # the summary Ansible prints: one line, whatever the reason a record gave held
        res["msg"] = inert("%s: gave up on %s after %s, in phase %s: %s (%s): %s. Why no restart: %s. %s%s%s"
                           "Artifacts: %s" % (run.host, run.unit_words(), counted(n, "attempt"), phase, title, code,
                                              redact_secrets(reason), because, "Rule 4: %s. " % held if held else "",
                                              "The node that never came: %s. " % missing if missing else "",
                                              kind, run.artifacts_words()))
        res["report"], report_error = self._write_incident_report()
        if report_error:
            res["report_error"] = report_error
            res["msg"] += ". %s" % report_error
        return res

    def note_interrupted(self, reason):
        """Record a run cut short by something outside the procedure (lost host, Ctrl-C).
        Nothing more is done to the service: it stays as the interruption found it."""
        run, record = self.run, self.run.record
        if record.get("outcome") == "interrupted":
            return
        at = run.access.clock()
        if run.current_attempt is not None:
            began = run.current_attempt["started_epoch_s"]
            record["attempts"].append(dict(
                run.current_attempt, verdict="interrupted", phase="unknown", reason_code="interrupted",
                reason=redact_secrets(reason), t=round(at - began, 3), action="interrupted"))
            run.current_attempt = None
        record.update({"finished": iso_utc(at), "outcome": "interrupted",
                       "gave_up_because": redact_secrets(reason),
                       "interrupted": {"reason": redact_secrets(reason), "during": run.stage,
                                       "service": "left as it was at that moment: nothing was "
                                                  "stopped or started after the interruption"}})
        self.write_run_quietly()

    def write_run_quietly(self):
        """run.json as it stands, where a failure to write it must not hide what ended the run."""
        try:
            self.run.artifacts.write_run(self.run.record)
        except OSError:
            pass

    def _write_incident_report(self):
        """(the report's paths, None), or (None, what failed) when the report could not be
        written, a broken import of its writer included: named in the run's output and
        the result, it never hides the hand-over itself (run.json is the record)."""
        try:
            # Imported here so that a broken report writer costs the report, not the restart.
            from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report import incident_report
            return incident_report.write_run_report(self.run.artifacts.path), None
        except Exception as exc:
            error = "incident report could not be written: %s: %s" % (type(exc).__name__, exc)
            self.run.access.emit(error)
            return None, error


def _with_host(missing_node, server):
    """"node 0" as the inventory knows it, "node 0 (gpu-a1)", where the run knows the server's nodes."""
    words = (missing_node or "").split()
    if server is None or len(words) != 2 or words[0] != "node" or not words[1].isdigit():
        return missing_node
    rank = int(words[1])
    return "%s (%s)" % (missing_node, server.nodes[rank]) if rank < len(server.nodes) else missing_node
