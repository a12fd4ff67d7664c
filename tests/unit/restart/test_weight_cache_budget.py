"""A later SGLang's weight cache delivery budget (sglang-facts.md "Delivery budget"): read with
the daemon's --status before each start and after a ready one, a cold restart planned below
weight_cache_min_deliveries and at once when it is exhausted, the metric; SGLang 0.5.23 has no
budget, and then nothing changes."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import weight_cache
from ansible_collections.sglang_ops.serving.plugins.module_utils.host import weight_cache_budget
from ansible_collections.sglang_ops.serving.plugins.module_utils.records import start_metrics
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import weight_cache_step

from ansible_collections.sglang_ops.serving.tests.unit.restart.restart_fakes import UNIT, make_procedure, ready, stalled
from ansible_collections.sglang_ops.serving.tests.unit.restart.test_weight_cache_restart import (
    DAEMON_ARGV, WeightCacheHost, view)

# The stand-in client's line when its daemon answered budget_exhausted (wc_client.py).
EXHAUSTED_LINE = ("RuntimeError: [IpcModelLoader] Weight cache daemon at /run/u-weights/sglang_weight_cache_x.sock "
                  "answered budget_exhausted: 3 of 3 deliveries of this daemon generation are spent. Drain the "
                  "engines and restart the daemon.")
FALLBACK_LINE = "[IpcModelLoader] Weight cache not available or config mismatch, falling back to disk load"


def budget(remaining, max_deliveries=128):
    return weight_cache.DeliveryBudget(max_deliveries, max_deliveries - remaining, remaining, 8)


def status_lines(*remaining, max_deliveries=3):
    return "".join(json.dumps({"max_deliveries": max_deliveries, "reserved": max_deliveries - r, "remaining": r,
                               "pid": 600 + g, "gpu_id": g}) + "\n" for g, r in enumerate(remaining))


# ---- the daemon's --status ------------------------------------------------------------------------
def test_status_asks_every_local_gpus_daemon_with_the_launchers_python_and_model():
    commands = weight_cache.status_commands(DAEMON_ARGV)
    assert commands == [[DAEMON_ARGV[0], "-m", "sglang.srt.weight_cache.daemon", "--status", "--model-path",
                         "/models/k", "--gpu-id", str(g)] for g in (0, 1)]


def test_status_follows_the_launchers_gpu_layout():
    argv = DAEMON_ARGV[:3] + ["--model-path=/m", "--tp-size", "8", "--nnodes", "2", "--base-gpu-id", "2",
                              "--gpu-id-step", "2"]
    assert [c[-1] for c in weight_cache.status_commands(argv)] == ["2", "4", "6", "8"]
    assert [c[-1] for c in weight_cache.status_commands(DAEMON_ARGV[:5] + ["--gpu-id", "3"])] == ["3"]


@pytest.mark.parametrize("argv, words", [
    (["/v/bin/python", "-m", "sglang.launch_server", "--model-path", "/m"], "not a weight cache daemon"),
    (DAEMON_ARGV[:3] + ["--tp-size", "2"], "no --model-path"),
    (DAEMON_ARGV + ["--base-gpu-id", "x"], "not numbers"),
])
def test_a_command_line_it_cannot_read_is_refused(argv, words):
    with pytest.raises(ValueError, match=words):
        weight_cache.status_commands(argv)


def test_the_launcher_is_found_among_the_units_processes():
    supervisor = ["/usr/bin/python3", "-I", "/x/sglang-supervisor", "--"] + DAEMON_ARGV
    spawned = ["/v/bin/python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main()"]
    assert weight_cache.daemon_launcher([supervisor, spawned, DAEMON_ARGV]) == DAEMON_ARGV
    assert weight_cache.daemon_launcher([supervisor, spawned]) is None


def test_the_fewest_left_of_any_gpu_is_the_budget():
    got, problem = weight_cache.parse_budget_status(0, status_lines(2, 1), "", 2)
    assert (got, problem) == (weight_cache.DeliveryBudget(3, 2, 1, 2), "")


def test_sglang_without_a_budget_refuses_status_and_nothing_is_claimed():
    err = "usage: sglang serve [-h]\nsglang serve: error: unrecognized arguments: --status\n"
    assert weight_cache.parse_budget_status(2, "", err, 8) == (None, "")
    assert weight_cache.parse_budget_status(0, "", err * 8, 8) == (None, "")     # the shell's wait says 0


@pytest.mark.parametrize("rc, out, err, words", [
    (1, "", "No weight cache daemon answers at /run/x.sock: [Errno 111] Connection refused\n", "0 of 2 weight cache"),
    (0, status_lines(3), "", "1 of 2 weight cache"),
    (0, '{"remaining": "many", "gpu_id": 0}\n{"remaining": 1, "gpu_id": 1}\n', "", "unreadable"),
])
def test_an_unreadable_status_is_a_problem_not_a_budget(rc, out, err, words):
    got, problem = weight_cache.parse_budget_status(rc, out, err, 2)
    assert got is None and words in problem


def test_the_cmdlines_command_reads_proc_as_it_is():
    """cmdlines_cmd run for real by this machine's shell: an argv with spaces and quotes intact,
    a pid that is gone left out."""
    argv = [sys.executable, "-c", "import time; time.sleep(30)", "a b", "c'd"]
    proc = subprocess.Popen(argv)    # pylint: disable=consider-using-with
    try:
        out = subprocess.run(["sh", "-c", weight_cache_budget.cmdlines_cmd([proc.pid, 999999999])],
                             capture_output=True, text=True, check=True).stdout
    finally:
        proc.kill()
        proc.wait()
    assert weight_cache_budget.parse_cmdlines(out) == {proc.pid: argv}


# ---- the reasons --------------------------------------------------------------------------------
def test_budget_reason_low_exhausted_and_enough():
    assert weight_cache.budget_reason(None, 8) is None
    assert weight_cache.budget_reason(budget(8), 8) is None
    assert weight_cache.budget_reason(budget(7), 8) == (
        "delivery_budget_low: 7 of 128 deliveries left, below weight_cache_min_deliveries=8")
    assert weight_cache.budget_reason(budget(0), 0).startswith("budget_exhausted: 0 of 128 deliveries left")
    assert weight_cache.budget_reason(budget(1), 0) is None


def test_an_exhausted_budget_is_named_before_the_failure_it_caused():
    reason = weight_cache.cold_reason("fatal_error", True, True, False, budget=budget(0), min_deliveries=0)
    assert reason.startswith(weight_cache.REASON_BUDGET_EXHAUSTED)
    reason = weight_cache.cold_reason("weight_cache_daemon_died", True, True, False, budget=budget(0))
    assert reason.startswith(weight_cache.REASON_BUDGET_EXHAUSTED)


def test_a_low_budget_comes_after_the_other_reasons_and_an_unhealthy_daemon_first():
    assert weight_cache.cold_reason(None, True, True, False, budget=budget(2), min_deliveries=8) == "warm_start_failed"
    assert weight_cache.cold_reason(None, True, False, False, budget=budget(2), min_deliveries=8).startswith(
        weight_cache.REASON_BUDGET_LOW)
    assert weight_cache.cold_reason(None, False, False, False, budget=budget(0)) == "daemon_not_healthy"


def test_an_engine_answered_budget_exhausted_is_no_fallback_to_disk():
    assert weight_cache.CLIENT_BUDGET_EXHAUSTED.search(EXHAUSTED_LINE)
    assert not weight_cache.CLIENT_BUDGET_EXHAUSTED.search(FALLBACK_LINE)
    assert weight_cache.attach_outcome(EXHAUSTED_LINE) is None
    kind = weight_cache.StartKind(daemon_healthy=True)
    assert kind.on_line(EXHAUSTED_LINE) and not kind.on_line(EXHAUSTED_LINE)
    assert kind.to_record() == {"restart_kind": "warm", "restart_kind_reason": "budget_exhausted"}
    assert kind.kind != weight_cache.RESTART_COLD_FALLBACK


# ---- the plan ---------------------------------------------------------------------------------------
def test_the_plan_is_warm_with_enough_left_and_cold_below_the_threshold():
    assert weight_cache_step.plan(view(), False, budget=budget(8), min_deliveries=8).kind == "warm"
    planned = weight_cache_step.plan(view(), False, budget=budget(7), min_deliveries=8)
    assert planned.cold and planned.reason.startswith("delivery_budget_low: 7 of 128")
    assert "delivery_budget_low" in planned.words()


def test_the_plan_is_cold_at_once_when_exhausted_even_with_no_threshold():
    planned = weight_cache_step.plan(view(), False, budget=budget(0), min_deliveries=0)
    assert planned.cold and planned.reason.startswith("budget_exhausted")


def test_a_start_answered_budget_exhausted_is_followed_by_a_cold_one_when_status_cannot_be_read():
    previous = {"verdict": "failed", "reason_code": "fatal_error", "restart_kind": "warm",
                "restart_kind_reason": "budget_exhausted"}
    planned = weight_cache_step.plan(view(), False, previous)
    assert (planned.kind, planned.reason) == ("cold", "budget_exhausted")


def test_min_deliveries_defaults_where_unset():
    assert weight_cache_step.min_deliveries({}) == weight_cache.DEFAULT_MIN_DELIVERIES
    assert weight_cache_step.min_deliveries({"weight_cache_min_deliveries": None}) == 8
    assert weight_cache_step.min_deliveries({"weight_cache_min_deliveries": 0}) == 0


# ---- the restart ----------------------------------------------------------------------------------
def _status_calls(host):
    return [c for c in host.commands if "--status" in c]


def test_sglang_0_5_23_changes_nothing_and_is_asked_once(tmp_path):
    host = WeightCacheHost()
    proc, host, dummy_probe, dummy_clock, lines, dummy_cmd = make_procedure(
        tmp_path, [[stalled("stall_idle", "cuda_graph")], [ready()]], host=host, metrics_dir="/m")
    res = proc.restart()
    assert res["outcome"] == "ready" and res["attempts"][0]["restart_kind_reason"] == "daemon_healthy"
    assert len(_status_calls(host)) == 1
    assert not [line for line in lines if "budget" in line]
    assert not [c for c in host.commands if "budget.prom" in c]
    run = json.load(open(res["run_json"]))    # pylint: disable=consider-using-with
    assert run["weight_cache"]["delivery_budget_supported"] is False
    assert not [k for k in run["weight_cache"] if k.startswith("delivery_budget_") and k != "delivery_budget_supported"]


def test_a_warm_restart_reads_the_budget_after_ready_and_writes_the_metric(tmp_path):
    host = WeightCacheHost(budget=20, reserved=5)
    proc, host, dummy_probe, dummy_clock, lines, dummy_cmd = make_procedure(
        tmp_path, [[ready()]], host=host, metrics_dir="/m", weight_cache_min_deliveries=8)
    res = proc.restart()
    assert res["attempts"][0]["restart_kind"] == "warm"
    assert res["weight_cache"]["delivery_budget_before"]["remaining"] == 15
    after = {"supported": True, "max_deliveries": 20, "reserved": 6, "remaining": 14, "gpus": 2}
    assert res["weight_cache"]["delivery_budget_after"] == after
    assert "weight cache delivery budget: 14 of 20 deliveries left" in lines
    [write] = [c for c in host.commands if start_metrics.budget_file_name(UNIT) in c]
    assert 'sglang_weight_cache_deliveries_remaining{host="gpu-host-1",unit="%s"} 14' % UNIT in write


def test_below_the_threshold_the_restart_is_cold_and_says_why(tmp_path):
    host = WeightCacheHost(budget=3, reserved=2)
    proc, host, dummy_probe, dummy_clock, lines, dummy_cmd = make_procedure(
        tmp_path, [[ready()]], host=host, weight_cache_min_deliveries=2)
    res = proc.restart()
    assert host.events == ["stop", "daemon restart", "start"]
    attempt = res["attempts"][0]
    assert attempt["restart_kind"] == "cold"
    assert attempt["restart_kind_reason"].startswith("delivery_budget_low: 1 of 3 deliveries left")
    assert any(line.startswith("attempt 1: cold restart; cold (delivery_budget_low: 1 of 3") for line in lines)
    assert "delivery_budget_low" in res["msg"]
    assert res["weight_cache"]["cold_restarts"][0]["reason"].startswith("delivery_budget_low")
    assert res["weight_cache"]["delivery_budget_after"]["remaining"] == 2     # a new generation, one spent
    run = json.load(open(res["run_json"]))    # pylint: disable=consider-using-with
    assert run["restart_kind_reason"].startswith("delivery_budget_low")


def test_after_ready_says_that_the_next_restart_is_cold(tmp_path):
    host = WeightCacheHost(budget=3, reserved=1)
    proc, host, dummy_probe, dummy_clock, lines, dummy_cmd = make_procedure(
        tmp_path, [[ready()]], host=host, weight_cache_min_deliveries=2)
    res = proc.restart()
    assert res["attempts"][0]["restart_kind"] == "warm"
    assert ("weight cache delivery budget: 1 of 3 deliveries left; the next restart is cold (delivery_budget_low: "
            "1 of 3 deliveries left, below weight_cache_min_deliveries=2)") in lines


def test_an_exhausted_budget_makes_a_supervised_restart_cold_at_once(tmp_path):
    host = WeightCacheHost(supervised=True, engine_starts=["ready"], budget=3, reserved=3)
    proc, host, dummy_probe, dummy_clock, lines, dummy_cmd = make_procedure(
        tmp_path, [], host=host, weight_cache_min_deliveries=0)
    res = proc.restart()
    assert res["outcome"] == "ready"
    assert host.events[:2] == ["stop", "daemon restart"] and "engine restart" in host.events
    assert len(res["attempts"]) == 1
    assert res["attempts"][0]["restart_kind_reason"].startswith("budget_exhausted: 0 of 3 deliveries left")
    assert lines[0].startswith("cold restart of %s: cold (budget_exhausted" % UNIT)


def test_a_supervised_warm_start_refused_by_an_exhausted_budget_goes_cold_with_that_reason(tmp_path):
    """One delivery left: the warm start takes it; it stalls, and the next start finds none left."""
    host = WeightCacheHost(supervised=True, engine_starts=["stalled", "ready"], budget=3, reserved=2,
                           systemd_restarts=True)
    proc, host, dummy_probe, dummy_clock, dummy_lines, dummy_cmd = make_procedure(
        tmp_path, [], host=host, weight_cache_min_deliveries=0)
    res = proc.restart()
    assert res["outcome"] == "ready" and "daemon restart" in host.events
    assert [a["restart_kind"] for a in res["attempts"]] == ["warm", "cold"]
    assert res["attempts"][0]["decision"].startswith("next start cold: budget_exhausted")
    assert res["attempts"][1]["restart_kind_reason"].startswith("budget_exhausted")


def test_an_unreadable_budget_is_said_and_the_plan_stays_as_it_was(tmp_path):
    host = WeightCacheHost(budget=3)
    host.daemon["pids"] = [500]          # the launcher gone from the unit's processes
    proc, host, dummy_probe, dummy_clock, lines, dummy_cmd = make_procedure(tmp_path, [[ready()]], host=host)
    res = proc.restart()
    assert res["attempts"][0]["restart_kind"] == "warm"
    assert any(line.startswith("weight cache delivery budget not read: no weight cache daemon process") for line in lines)


# ---- the metric -------------------------------------------------------------------------------------
def test_the_budget_file_is_its_own_and_promtool_accepts_it():
    text = start_metrics.render_delivery_budget(UNIT, budget(5, 128), host="gpu-host-1", clock=lambda: 1796000000.5)
    assert start_metrics.budget_file_name(UNIT) != start_metrics.file_name(UNIT)
    assert 'sglang_weight_cache_deliveries_remaining{host="gpu-host-1",unit="%s"} 5' % UNIT in text
    assert 'sglang_weight_cache_deliveries{host="gpu-host-1",unit="%s"} 128' % UNIT in text
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: apt-get install prometheus (.ci/run installs it)"
    check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runuser"), reason="runuser needs root")
def test_the_status_command_runs_each_gpus_query_in_the_launchers_environment(tmp_path):
    """status_cmd run for real: every GPU asked with the launcher's python and environment, the
    answers one line each however they interleave."""
    fake_python = tmp_path / "python"
    fake_python.write_text("#!/bin/sh\n"
                           "g=$(echo \"$@\" | sed 's/.*--gpu-id //')\n"
                           "sleep 0.$((g % 3))\n"
                           "printf '{\"gpu_id\": %s, \"max_deliveries\": 3, \"reserved\": 1, \"remaining\": %s, "
                           "\"template\": \"%s\"}\\n' \"$g\" \"$((2 - g % 2))\" \"$SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE\"\n"
                           "echo \"gpu $g asked\" >&2\n")
    fake_python.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE": "/run/u w/{device_uuid}.sock"}
    launcher = subprocess.Popen(["sleep", "30"], env=env)    # pylint: disable=consider-using-with
    try:
        argv = [str(fake_python), "-m", "sglang.srt.weight_cache.daemon", "--model-path", "/m o", "--tp-size", "4"]
        got = subprocess.run(["sh", "-c", weight_cache_budget.status_cmd(launcher.pid, weight_cache.status_commands(argv))],
                             capture_output=True, text=True, check=False, timeout=60)
    finally:
        launcher.kill()
        launcher.wait()
    answers = [json.loads(line) for line in got.stdout.splitlines()]
    assert sorted(a["gpu_id"] for a in answers) == [0, 1, 2, 3]
    assert {a["template"] for a in answers} == {"/run/u w/{device_uuid}.sock"}
    assert sorted(got.stderr.splitlines()) == ["gpu %d asked" % g for g in range(4)]
    assert weight_cache.parse_budget_status(got.returncode, got.stdout, got.stderr, 4)[0].remaining == 1
