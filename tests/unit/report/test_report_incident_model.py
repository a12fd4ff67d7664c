"""The incident model: onset, evidence, summary, next steps, automation, from handmade input."""
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_model import build_incident, fmt_duration

from ansible_collections.sglang_ops.serving.tests.unit.report.report_fixtures import HEADER, assessment, obs, packing_failure, runbook_sections


def _packing_incident(**kw):
    observations, assessments = packing_failure()
    return build_incident(HEADER, observations, assessments, runbook=runbook_sections(), **kw)


def test_failure_onset_is_the_first_fatal_journal_line_not_the_poll_that_saw_it():
    inc = _packing_incident()
    assert inc.verdict == "failed" and inc.reason_code == "fatal_packing"
    assert inc.decided_t == 90.0
    assert inc.onset_t == 83.0


def test_summary_is_five_lines_what_phase_since_evidence_tried():
    inc = _packing_incident()
    assert len(inc.summary) == 5
    what, phase, since, evidence, tried = inc.summary
    assert "error while repacking weights" in what and "fatal_packing" in what
    assert phase.startswith("Phase: post_load")
    assert "t+1m23s" in since and "t+1m30s" in since
    assert "Unexpected error during packing" in evidence and "TP1" in evidence
    assert tried.startswith("Automation tried: Nothing") and "tries a restart" in tried


def test_next_steps_are_the_runbook_section_of_the_reason_code():
    inc = _packing_incident()
    section = runbook_sections()["fatal_packing"]
    assert inc.next_steps.anchor == "fatal_packing"
    assert inc.next_steps.steps == section.part("Next steps")
    assert inc.next_steps.escalate == section.part("Escalate")
    assert inc.next_steps.confirm == section.part("Confirm")


def test_stall_onset_is_when_the_last_channel_moved():
    observations = [obs(t) for t in (0, 10, 20, 30)]
    assessments = [assessment(0, "post_load", "progressing", "progressing"),
                   assessment(10, "post_load", "quiet", "quiet"),
                   assessment(20, "post_load", "suspect", "suspect_idle"),
                   assessment(30, "post_load", "stalled", "stall_idle", "every signal flat",
                              {"moved": [], "last_moved": {"log": 2.0, "gpu_mem": 8.0}, "no_progress_s": 22.0})]
    inc = build_incident(HEADER, observations, assessments, runbook=runbook_sections())
    assert (inc.verdict, inc.onset_t, inc.decided_t) == ("stalled", 8.0, 30.0)
    assert "gpu_mem" in inc.onset_basis
    assert "Nothing moved for 22s" in inc.evidence
    assert inc.next_steps.anchor == "stall_idle"


def test_run_json_says_what_was_decided_and_what_automation_did():
    run = {"host": "gpu-7", "unit": "sglang-k26-ddtree", "started": "2026-11-29T21:00:00Z", "outcome": "gave_up",
           "gave_up_because": "same failure twice: fatal_packing",
           "attempts": [
               {"n": 1, "verdict": "failed", "phase": "post_load", "reason_code": "fatal_packing", "reason": "r1",
                "t": 590.0, "action": "restarted"},
               {"n": 2, "verdict": "failed", "phase": "post_load", "reason_code": "fatal_packing", "reason": "r2",
                "t": 90.0, "action": "handed_over"}]}
    inc = _packing_incident(run=run)
    assert inc.host == "gpu-7" and inc.decided_t == 90.0 and inc.reason == "r2"
    assert "attempt 1: failed in post_load at t+9m50s (fatal_packing) → restarted" in inc.automation
    assert "gave_up: same failure twice: fatal_packing" in inc.automation
    assert "2026-11-29T21:00:00Z" in inc.summary[2]


def test_diagnostics_show_the_tail_of_the_journal_and_the_head_of_the_rest():
    journal = "\n".join("journal line %d" % n for n in range(100))
    smi = "\n".join("smi line %d" % n for n in range(100))
    inc = _packing_incident(diagnostics={"journal.txt": journal, "nvidia-smi.txt": smi, "unit-status.txt": "ok"})
    by_name = {d.name: d for d in inc.diagnostics}
    assert [d.name for d in inc.diagnostics] == ["unit-status.txt", "journal.txt", "nvidia-smi.txt"]
    assert by_name["journal.txt"].text.splitlines()[-1] == "journal line 99"
    assert by_name["nvidia-smi.txt"].text.splitlines()[0] == "smi line 0"
    assert by_name["journal.txt"].lines_total == 100 and by_name["journal.txt"].lines_shown == 40


def test_a_trace_that_ends_before_a_verdict_is_reported_as_undecided():
    observations = [obs(t) for t in (0, 10)]
    assessments = [assessment(0, "weight_load", "progressing", "progressing"),
                   assessment(10, "weight_load", "quiet", "quiet")]
    inc = build_incident(HEADER, observations, assessments, runbook=runbook_sections())
    assert inc.verdict == "undecided" and inc.decided_t is None and inc.next_steps is None
    assert inc.summary[0].startswith("No verdict")


def test_durations_read_like_an_operator_writes_them():
    assert [fmt_duration(s) for s in (45, 583, 3725, None)] == ["45s", "9m43s", "1h02m", "?"]


def test_onset_gets_a_wall_clock_time_when_the_attempt_start_is_recorded():
    run = {"host": "h", "unit": "sglang-k26-ddtree", "outcome": "gave_up", "gave_up_because": "x",
           "attempts": [{"n": 1, "verdict": "failed", "phase": "post_load", "reason_code": "fatal_packing",
                         "reason": "r", "t": 90.0, "action": "handed_over", "started_epoch_s": 1798578000.0}]}
    inc = _packing_incident(run=run)
    assert "t+1m23s into the start (first fatal line in the journal; 2026-12-29 21:01:23 UTC)" in inc.summary[2]
    assert "decided at t+1m30s (2026-12-29 21:01:30 UTC)" in inc.summary[2]


def test_when_the_replay_disagrees_with_run_json_the_report_keeps_what_was_acted_on():
    observations, assessments = packing_failure()  # the replay says fatal_packing
    run = {"host": "h", "unit": "sglang-k26-ddtree", "outcome": "gave_up", "gave_up_because": "same failure twice",
           "attempts": [{"n": 1, "verdict": "stalled", "phase": "post_load", "reason_code": "stall_idle",
                         "reason": "every signal flat for 60 s", "t": 40.0, "action": "handed_over"}]}
    inc = build_incident(HEADER, observations, assessments, run=run, runbook=runbook_sections())
    assert inc.evidence[0] == "Detector: every signal flat for 60 s"
    assert not any("fatal_packing" in e or "repacking" in e for e in inc.evidence)
    assert inc.next_steps.anchor == "stall_idle"
