import dataclasses
import json
import os

from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import read_trace

from ansible_collections.sglang_ops.serving.tests.unit.restart.restart_fakes import (
    FakeHost, FakeProbe, Clock, holder, make_procedure, progressing, ready, stalled)


def _run_json(res):
    with open(res["run_json"]) as fh:
        return json.load(fh)


def test_clean_restart_stops_starts_once_and_ends_ready(tmp_path):
    proc, host, probe, clock, lines, _detectors = make_procedure(tmp_path, [[progressing(), progressing(), ready()]])
    res = proc.restart()
    assert res["outcome"] == "ready" and not res.get("failed")
    assert res["changed"] is True
    assert host.events == ["stop", "start"]
    assert [a["action"] for a in res["attempts"]] == ["ready"]
    assert len([line for line in lines if line.startswith("weight_load \u00b7 ")]) == 2
    header, observations = read_trace(os.path.join(res["artifacts"], "attempt-1", "trace.jsonl"))
    assert header["unit"] == "sglang-k26-ddtree" and header["poll_s"] == 5.0 and header["gpus"] == 1
    assert "expect" not in header
    assert [o["t"] for o in observations] == [0.0, 5.0, 10.0]
    assert _run_json(res)["outcome"] == "ready"


def test_first_probe_asks_for_journal_since_the_start_then_follows_the_cursor(tmp_path):
    proc, _host, probe, clock, _lines, _detectors = make_procedure(tmp_path, [[progressing(), ready()]])
    t_start = clock()
    proc.restart()
    assert probe.calls[0]["since_epoch_s"] == t_start and "cursor" not in probe.calls[0]
    assert probe.calls[1]["cursor"] == "cursor-1" and "since_epoch_s" not in probe.calls[1]
    assert probe.calls[0]["venv_bin"] == "/opt/sglang/venvs/0.5.23/bin" and probe.calls[0]["model"] == "default"


def test_stall_in_first_attempt_is_diagnosed_then_restarted_to_ready(tmp_path):
    proc, host, probe, clock, lines, _detectors = make_procedure(
        tmp_path, [[progressing(), stalled("stall_idle")], [progressing(), ready()]])
    res = proc.restart()
    assert res["outcome"] == "ready"
    assert host.events == ["stop", "start", "stop", "start"]
    first, second = res["attempts"]
    assert (first["verdict"], first["reason_code"], first["action"]) == ("stalled", "stall_idle", "restarted")
    assert second["action"] == "ready"
    diag = os.path.join(res["artifacts"], first["diagnostics"])
    assert sorted(os.listdir(diag)) == ["journal.txt", "nvidia-smi.txt", "ports.txt", "processes.txt",
                                        "py-spy-rank0.txt", "unit-status.txt"]
    assert "sk-abcdef123456" not in open(os.path.join(diag, "journal.txt")).read()
    assert host.diagnostics_since == [first["started_epoch_s"] - 5]  # the journal of that attempt
    # one backoff wait before the restart, within the policy's bounds for restart 1
    backoff_waits = [s for s in clock.slept if s not in (5.0,)]
    assert len(backoff_waits) == 1 and 8.0 <= backoff_waits[0] <= 12.0
    assert any("STALLED in weight_load" in line for line in lines)
    assert os.path.exists(os.path.join(res["artifacts"], "attempt-2", "trace.jsonl"))


def test_diagnostics_that_cannot_be_read_leave_the_reason_and_the_run_goes_on(tmp_path):
    proc, host, *_others = make_procedure(tmp_path, [[stalled("stall_idle")], [ready()]])
    real_read = host.read

    def read(module_args):
        if module_args.get("diagnostics"):
            return {"failed": True, "msg": "module timed out"}
        return real_read(module_args)
    host.read = read
    res = proc.restart()
    assert res["outcome"] == "ready"
    diag = os.path.join(res["artifacts"], res["attempts"][0]["diagnostics"])
    assert os.listdir(diag) == ["capture-failed.txt"]
    assert "module timed out" in open(os.path.join(diag, "capture-failed.txt")).read()


def test_same_failure_twice_with_no_attempt_left_is_handed_over(tmp_path):
    proc, host, *_others = make_procedure(tmp_path, [[stalled("stall_idle")], [stalled("stall_idle")]], max_attempts=2)
    res = proc.restart()
    assert res["failed"] is True and res["outcome"] == "gave_up"
    assert host.events.count("start") == 2
    for part in ("gpu-host-1", "weight_load", "stall_idle", "2 attempts", res["artifacts"]):
        assert part in res["msg"]
    run = _run_json(res)
    assert run["outcome"] == "gave_up"
    assert [a["action"] for a in run["attempts"]] == ["restarted", "handed_over"]
    assert set(run["attempts"][0]) >= {"n", "trace", "verdict", "phase", "reason_code", "reason", "t",
                                       "action", "diagnostics"}


def test_same_failure_twice_with_an_attempt_left_runs_the_next_start_observe_only(tmp_path):
    # rule 4: a third stop for the same verdict would keep the server down by our own verdict
    made = []
    proc, host, *_others = make_procedure(tmp_path, [[stalled("stall_idle")], [stalled("stall_idle")], [ready()]],
                                          max_attempts=3)
    real_new = proc.options.new_detector

    def new_detector(settings, observe_only=None):
        made.append(observe_only)
        return real_new(settings, observe_only)
    proc.options = dataclasses.replace(proc.options, new_detector=new_detector)
    res = proc.restart()
    assert res["outcome"] == "ready" and host.events.count("start") == 3
    assert made[:2] == [None, None] and made[2] is not None and made[2].phase == "weight_load"
    run = _run_json(res)
    assert [a["action"] for a in run["attempts"]][:2] == ["restarted", "restarted"]
    assert "observe-only" in run["attempts"][2]["observe_only"]["words"]


def test_failure_a_restart_cannot_fix_is_handed_over_at_once(tmp_path):
    proc, host, *_others = make_procedure(tmp_path, [[stalled("stall_spin", "distributed_init")]])
    res = proc.restart()
    assert res["failed"] and host.events == ["stop", "start"]
    assert res["phase"] == "distributed_init" and res["reason_code"] == "stall_spin"
    assert "cannot fix stall_spin" in res["gave_up_because"]


def test_attempts_are_bounded_by_max_attempts(tmp_path):
    proc, host, *_others = make_procedure(
        tmp_path, [[stalled("stall_idle")], [stalled("process_exited")], [stalled("fatal_error")]], max_attempts=2)
    res = proc.restart()
    assert res["failed"] and host.events.count("start") == 2
    assert res["gave_up_because"].startswith("attempts exhausted: 2 of 2")


def test_foreign_gpu_process_stops_the_restart_before_anything_changes(tmp_path):
    host = FakeHost(holders=[holder(4242, 20000, "/usr/bin/python3 train.py --big")])
    proc, host, *_others = make_procedure(tmp_path, [[ready()]], host=host)
    res = proc.restart()
    assert res["failed"] and res["reason_code"] == "gpu_busy_foreign" and res["phase"] == "preflight"
    assert host.events == [] and res["changed"] is False
    assert "PID 4242" in res["msg"] and "train.py --big" in res["msg"]


def test_orphan_is_named_and_kept_when_killing_is_not_allowed(tmp_path):
    host = FakeHost(holders=[holder(555, 8000, "sglang::scheduler_TP0")])
    proc, host, *_others = make_procedure(tmp_path, [[ready()]], host=host)
    res = proc.restart()
    assert res["failed"] and res["reason_code"] == "orphan_processes"
    assert "PID 555" in res["msg"] and "kill_orphans" in res["msg"]
    assert host.events == []


def test_orphan_is_killed_after_the_stop_when_allowed(tmp_path):
    orphan = holder(555, 8000, "sglang::scheduler_TP0")
    host = FakeHost(holders=[orphan], holders_after_stop=[orphan])
    proc, host, *_others = make_procedure(tmp_path, [[ready()]], host=host, kill_orphans=True)
    res = proc.restart()
    assert res["outcome"] == "ready"
    assert host.events == ["stop", "kill -9 555", "start"]
    assert _run_json(res)["preflight"]["orphans_killed"][0].startswith("PID 555")


def test_processes_surviving_the_stop_get_sigkill_then_the_start_waits(tmp_path):
    host = FakeHost(pids_after_stop=2)
    proc, host, *_others = make_procedure(tmp_path, [[ready()]], host=host)
    assert proc.restart()["outcome"] == "ready"
    assert host.events == ["stop", "sigkill", "sigkill", "start"]


def test_processes_that_never_die_hand_over_as_gpu_not_released(tmp_path):
    host = FakeHost(pids_after_stop=10_000)
    proc, host, *_others = make_procedure(tmp_path, [[ready()]], host=host, release_timeout_s=10.0)
    res = proc.restart()
    assert res["failed"] and res["reason_code"] == "gpu_not_released" and "start" not in host.events
    assert "PID 77 (state T)" in res["reason"]


def test_missing_unit_is_handed_over_in_preflight(tmp_path):
    proc, host, *_others = make_procedure(tmp_path, [[ready()]], host=FakeHost(installed=False))
    res = proc.restart()
    assert res["reason_code"] == "unit_missing" and host.events == []


def run_with_no_completion_answering(tmp_path, start_timeout_s):
    """One attempt on which the detector says ready every poll but no completion succeeds."""
    clock = Clock()
    probe = FakeProbe(clock, completion_ok=False)
    proc, *_others = make_procedure(tmp_path, [[ready()]], clock=clock, probe=probe,
                                    start_timeout_s=start_timeout_s, max_attempts=1)
    return proc.restart()


def test_ready_waits_for_a_real_completion(tmp_path):
    res = run_with_no_completion_answering(tmp_path, start_timeout_s=30.0)
    # the detector said ready on every poll, but no completion succeeded: never ready
    assert res["outcome"] != "ready"
    assert res["attempts"][0]["reason_code"] == "stall_no_progress"
    assert "start_timeout_s=30" in res["attempts"][0]["reason"]


def test_stacks_are_requested_on_the_poll_after_the_detector_asks(tmp_path):
    suspect = ("suspect", "post_load", "suspect", "flat")
    proc, _host, probe, *_others = make_procedure(tmp_path, [[progressing(), suspect, ready()]])
    proc.restart()
    assert [c["stacks"] for c in probe.calls] == [False, False, True]


def test_a_few_probe_failures_are_tolerated(tmp_path):
    clock = Clock()
    probe = FakeProbe(clock)
    probe.fail_next = 2
    proc, *_others = make_procedure(tmp_path, [[progressing(), ready()]], clock=clock, probe=probe)
    assert proc.restart()["outcome"] == "ready"


def test_check_mode_observes_once_and_never_stops_or_starts(tmp_path):
    proc, host, probe, *_others = make_procedure(tmp_path, [[progressing("kv_cache")]])
    res = proc.observe_once()
    assert host.events == [] and len(probe.calls) == 1
    assert res["outcome"] == "check_mode" and res["phase"] == "kv_cache"
    assert res["would"].startswith("would stop sglang-k26-ddtree")
    assert _run_json(res)["outcome"] == "check_mode"


def test_secrets_never_reach_run_json_or_the_result(tmp_path):
    host = FakeHost(holders=[holder(555, 8000, "sglang::scheduler_TP0 --api-key sk-abcdef123456")])
    proc, host, *_others = make_procedure(tmp_path, [[ready()]], host=host)
    res = proc.restart()
    assert "sk-abcdef123456" not in json.dumps(res)
    assert "sk-abcdef123456" not in open(res["run_json"]).read()


def test_a_failed_start_is_stopped_with_the_short_timeout_a_serving_one_with_the_full(tmp_path):
    proc, host, *_others = make_procedure(tmp_path, [[stalled("stall_idle")], [ready()]],
                                          stop_timeout_s=300.0, failed_stop_timeout_s=20.0)
    proc.restart()
    stops = [c for c in host.commands if "systemctl stop" in c]
    assert [c.split()[1] for c in stops] == ["300", "20"]


def test_the_start_waits_until_the_stop_job_is_over(tmp_path):
    proc, host, _probe, clock, *_others = make_procedure(tmp_path, [[ready()]], host=FakeHost(settle_polls=3))
    assert proc.restart()["outcome"] == "ready"
    assert host.settle_polls == 0
    assert clock.slept[:3] == [2.0, 2.0, 2.0]


def test_a_stop_job_stuck_without_processes_gets_one_daemon_reload(tmp_path):
    host = FakeHost(settle_polls=10_000, reload_settles=True)
    proc, host, *_others = make_procedure(tmp_path, [[ready()]], host=host, release_timeout_s=60.0)
    assert proc.restart()["outcome"] == "ready"
    assert host.events == ["stop", "daemon-reload", "start"]


def test_a_stop_job_that_never_ends_is_handed_over(tmp_path):
    proc, host, *_others = make_procedure(tmp_path, [[ready()]], host=FakeHost(settle_polls=10_000),
                                          release_timeout_s=30.0)
    res = proc.restart()
    assert res["reason_code"] == "gpu_not_released" and "did not settle" in res["reason"]
    assert "start" not in host.events and host.events.count("daemon-reload") == 1


def test_hosts_watched_in_parallel_keep_their_own_state(tmp_path):
    import threading

    results = {}

    def run(name, scripts):
        proc, *_others = make_procedure(tmp_path / name, scripts)
        proc.host = name
        results[name] = proc.restart()

    threads = [threading.Thread(target=run, args=("a", [[stalled("stall_idle")], [stalled("stall_spin", "distributed_init")]])),
               threading.Thread(target=run, args=("b", [[progressing(), ready()]]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["a"]["outcome"] == "gave_up" and len(results["a"]["attempts"]) == 2
    assert results["b"]["outcome"] == "ready" and len(results["b"]["attempts"]) == 1
    assert results["a"]["artifacts"] != results["b"]["artifacts"]


def test_prewarm_runs_before_the_first_stop_and_is_recorded(tmp_path):
    order = []
    proc, host, *_others = make_procedure(tmp_path, [[ready()]], prewarm={"model_path": "/m", "step_s": 5})

    def prewarm(options, step_s, max_total_s):
        order.append(("prewarm", list(host.events), options, step_s))
        return {"msg": "prewarm: 10% -> 100% resident", "done": True}

    proc.prewarm = prewarm
    res = proc.restart()
    assert order == [("prewarm", [], {"model_path": "/m"}, 5.0)]
    assert json.load(open(res["run_json"]))["prewarm"]["done"] is True


def test_a_failing_prewarm_does_not_stop_the_restart(tmp_path):
    proc, _host, _probe, _clock, lines, _detectors = make_procedure(tmp_path, [[ready()]], prewarm={"model_path": "/m"})

    def prewarm(options, step_s, max_total_s):
        raise RuntimeError("module not found")

    proc.prewarm = prewarm
    assert proc.restart()["outcome"] == "ready"
    assert any("prewarm skipped" in line for line in lines)


def test_a_run_cut_short_is_recorded_as_interrupted(tmp_path):
    proc, *_others = make_procedure(tmp_path, [[ready()]])
    proc.note_interrupted("KeyboardInterrupt: ")
    run = json.load(open(os.path.join(proc.artifacts.path, "run.json")))
    assert run["outcome"] == "interrupted" and run["finished"]


def test_every_observation_of_the_trace_carries_the_assessment_the_watch_made(tmp_path):
    proc, *_others = make_procedure(tmp_path, [[progressing(), stalled("stall_idle")], [progressing(), ready()]])
    res = proc.restart()
    for n, verdicts in ((1, ["progressing", "stalled"]), (2, ["progressing", "ready"])):
        dummy_header, observations = read_trace(os.path.join(res["artifacts"], "attempt-%d" % n, "trace.jsonl"))
        assert [o["assessment"]["verdict"] for o in observations] == verdicts
        assert observations[-1]["assessment"]["final"] is True
        assert observations[-1]["assessment"]["t"] == res["attempts"][n - 1]["t"]
    assert res["attempts"][0]["reason_code"] == "stall_idle"


def test_the_report_tells_the_decision_of_the_watch_not_a_replay(tmp_path):
    from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_report import write_incident_report

    clock = Clock()
    # The detector never decides; the start timeout does. A replay of the trace would
    # leave the report undecided, the trace knows what was decided.
    proc, *_others = make_procedure(tmp_path, [[progressing()]], clock=clock, probe=FakeProbe(clock),
                                    start_timeout_s=20.0, max_attempts=1)
    res = proc.restart()
    assert res["outcome"] == "gave_up" and res["attempts"][0]["reason_code"] == "stall_no_progress"
    dummy_header, observations = read_trace(os.path.join(res["artifacts"], "attempt-1", "trace.jsonl"))
    assert observations[-1]["assessment"]["reason_code"] == "stall_no_progress"
    with open(write_incident_report(res["artifacts"])["json"]) as fh:
        report = json.load(fh)
    assert (report["verdict"], report["reason_code"]) == ("stalled", "stall_no_progress")


def test_ready_awaiting_a_completion_is_written_as_pending_not_as_the_decision(tmp_path):
    res = run_with_no_completion_answering(tmp_path, start_timeout_s=12.0)
    dummy_header, observations = read_trace(os.path.join(res["artifacts"], "attempt-1", "trace.jsonl"))
    verdicts = [o["assessment"]["verdict"] for o in observations]
    assert verdicts[:-1] == ["ready_pending"] * (len(verdicts) - 1) and verdicts[-1] == "stalled"
