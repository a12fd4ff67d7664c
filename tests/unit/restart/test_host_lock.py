"""The host's restart lock: the stale rules, and the real shell commands run on this
machine (sh, flock, a lock folder under tmp_path) by contending holders."""
import json
import multiprocessing
import os
import subprocess
import time

import pytest

from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import host_lock
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.host_lock import HostLock, LockHeld

from restart_fakes import FakeHost, make_procedure, progressing, ready

ARGS = {"unit": "sglang-k26-ddtree", "max_attempts": 3, "stop_timeout_s": 330.0, "release_timeout_s": 120.0,
        "start_timeout_s": 7200.0, "backoff_max_s": 120.0, "prewarm": {}}


def local_shell(cmd, timeout_s=None):
    """The action's remote step, run on this machine: `sh -c` with a timeout."""
    proc = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=timeout_s or 60)
    return proc.returncode, proc.stdout, proc.stderr


def holder(pid, controller="ctl-a", user="alice", now=1_800_000_000.0, artifacts="/art/run-1"):
    return host_lock.holder_record(ARGS, artifacts, now, pid=pid, controller=controller, user=user)


def lock_of(tmp_path, rec, **kw):
    return HostLock(local_shell, rec, lock_dir=str(tmp_path / "run"), **kw)


def test_max_run_time_covers_every_attempt_and_the_waits_between():
    assert host_lock.max_run_s(ARGS) == 3 * (330 + 30 + 120 + 90 + 7200) + 2 * 120
    assert host_lock.max_run_s(dict(ARGS, prewarm={"max_total_s": 600})) == host_lock.max_run_s(ARGS) + 600
    assert host_lock.max_run_s(dict(ARGS, prewarm={"model_path": "/m"})) == host_lock.max_run_s(ARGS) + 3600


def test_stale_rules():
    rec = holder(pid=4242)
    alive = lambda pid: True  # noqa: E731
    dead = lambda pid: False  # noqa: E731
    assert host_lock.stale_because(rec, rec["started_epoch_s"] + 60, "ctl-b", dead) is None
    assert host_lock.stale_because(rec, rec["started_epoch_s"] + 60, "ctl-a", alive) is None
    assert "process 4242 on this controller is gone" in host_lock.stale_because(rec, rec["started_epoch_s"] + 60,
                                                                                  "ctl-a", dead)
    assert "would have ended" in host_lock.stale_because(rec, rec["expires_epoch_s"] + 1, "ctl-b", alive)
    assert host_lock.stale_because(rec, rec["started_epoch_s"], "ctl-b", alive, force=True) == "break_lock was given"


def test_second_holder_fails_fast_naming_the_first_and_since_when(tmp_path):
    first = lock_of(tmp_path, holder(pid=os.getpid(), controller="ctl-a"))
    assert first.acquire() is None and first.held
    on_disk = json.loads((tmp_path / "run" / "restart.lock").read_text())
    assert on_disk["controller"] == "ctl-a" and on_disk["pid"] == os.getpid()
    second = lock_of(tmp_path, holder(pid=1, controller="ctl-b", user="bob"), controller="ctl-b")
    with pytest.raises(LockHeld) as err:
        second.acquire()
    text = str(err.value)
    assert "alice@ctl-a (PID %d)" % os.getpid() in text
    assert "running since 2027-01-15T08:00:00Z" in text and "artifacts /art/run-1" in text
    assert not second.held
    # the loser's release touches nothing; the holder's release frees it for the next run
    assert second.release() is None and (tmp_path / "run" / "restart.lock").exists()
    assert first.release() is None and not (tmp_path / "run" / "restart.lock").exists()
    assert second.acquire() is None


def test_release_of_a_lock_taken_over_meanwhile_leaves_the_new_holder(tmp_path):
    first = lock_of(tmp_path, holder(pid=os.getpid()))
    first.acquire()
    breaker = lock_of(tmp_path, holder(pid=os.getpid(), controller="ctl-b"), force=True, controller="ctl-b")
    old, why = breaker.acquire()
    assert old["run_id"] == first.holder["run_id"] and why == "break_lock was given"
    assert first.release() == "the lock was no longer this run's"
    assert json.loads((tmp_path / "run" / "restart.lock").read_text())["run_id"] == breaker.holder["run_id"]


def test_expired_lock_and_dead_local_holder_are_taken_over(tmp_path):
    stale = holder(pid=os.getpid(), now=1_000_000_000.0)  # expired long ago by the host's clock
    lock_of(tmp_path, stale).acquire()
    taker = lock_of(tmp_path, holder(pid=os.getpid(), controller="ctl-b"), controller="ctl-b")
    old, why = taker.acquire()
    assert old["run_id"] == stale["run_id"] and "would have ended by 2001-09-" in why
    taker.release()
    dead_pid = subprocess.Popen(["true"])
    dead_pid.wait()
    lock_of(tmp_path, holder(pid=dead_pid.pid, now=9_999_999_999.0 - 10**5)).acquire()
    old, why = lock_of(tmp_path, holder(pid=os.getpid())).acquire()
    assert "process %d on this controller is gone" % dead_pid.pid in why


def _contend(args):
    lock_dir, n = args
    lock = HostLock(local_shell, host_lock.holder_record(ARGS, "/art/%d" % n, 1_800_000_000.0, pid=os.getpid(),
                                                         controller="ctl-%d" % n), lock_dir=lock_dir)
    try:
        lock.acquire()
        return n
    except LockHeld:
        return None


def test_many_controllers_at_once_exactly_one_wins(tmp_path):
    with multiprocessing.get_context("fork").Pool(6) as pool:
        winners = [n for n in pool.map(_contend, [(str(tmp_path / "run"), n) for n in range(6)]) if n is not None]
    assert len(winners) == 1
    assert json.loads((tmp_path / "run" / "restart.lock").read_text())["controller"] == "ctl-%d" % winners[0]


class LockingHost(FakeHost):
    """The scripted host, with the lock commands run for real on this machine."""

    def shell(self, cmd, timeout_s=None):
        if "restart.lock" in cmd:
            return local_shell(cmd, timeout_s)
        return super().shell(cmd, timeout_s)


def test_second_restart_while_one_holds_the_host_changes_nothing(tmp_path):
    host = LockingHost()
    running = lock_of(tmp_path, holder(pid=os.getpid(), controller="ctl-a"))
    running.acquire()
    proc, host, *_ = make_procedure(tmp_path, [[ready()]], host=host)
    proc.lock = HostLock(host.shell, holder(pid=os.getpid(), controller="ctl-b", user="bob"),
                         lock_dir=str(tmp_path / "run"), controller="ctl-b")
    res = proc.restart()
    assert res["failed"] and res["reason_code"] == "restart_locked" and res["phase"] == "preflight"
    assert "alice@ctl-a" in res["msg"] and "running since" in res["msg"]
    assert host.events == [] and host.commands == [] and host.reads == []  # not even the preflight ran
    assert (tmp_path / "run" / "restart.lock").exists()


def test_restart_holds_the_lock_while_it_runs_and_gives_it_back(tmp_path):
    host = LockingHost()
    seen = []
    proc, host, probe, *_ = make_procedure(tmp_path, [[progressing(), ready()]], host=host)
    proc.lock = HostLock(host.shell, holder(pid=os.getpid()), lock_dir=str(tmp_path / "run"))
    real_probe = proc.access.run_probe

    def probe_and_look(module_args):
        seen.append((tmp_path / "run" / "restart.lock").exists())
        return real_probe(module_args)
    proc.access.run_probe = probe_and_look
    res = proc.restart()
    # two observations and every read of the host, all under the lock
    assert res["outcome"] == "ready" and host.reads and seen == [True] * (2 + len(host.reads))
    assert not (tmp_path / "run" / "restart.lock").exists()
    with open(res["run_json"]) as fh:
        assert json.load(fh)["lock"]["path"] == str(tmp_path / "run" / "restart.lock")


def test_ctrl_c_during_the_watch_records_the_run_releases_the_lock_and_touches_nothing_more(tmp_path):
    import signal

    from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.restart_procedure import RunInterrupted, interruptible
    host = LockingHost()
    proc, host, probe, *_ = make_procedure(tmp_path, [[progressing(), progressing(), progressing(), ready()]],
                                           host=host)
    proc.lock = HostLock(host.shell, holder(pid=os.getpid()), lock_dir=str(tmp_path / "run"))
    real_probe = proc.access.run_probe

    def probe_then_ctrl_c(module_args):
        if len(probe.calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)  # what the terminal sends
        return real_probe(module_args)
    proc.access.run_probe = probe_then_ctrl_c
    previous = signal.getsignal(signal.SIGINT)
    with pytest.raises(RunInterrupted) as err:
        interruptible(proc.restart)
    assert err.value.signame == "SIGINT"
    assert signal.getsignal(signal.SIGINT) is previous
    assert host.events == ["stop", "start"]  # no stop after the interruption
    assert not (tmp_path / "run" / "restart.lock").exists()
    run_dir = os.path.dirname(proc.artifacts.abspath("run.json"))
    with open(os.path.join(run_dir, "run.json")) as fh:
        run = json.load(fh)
    assert run["outcome"] == "interrupted" and run["gave_up_because"] == "interrupted by SIGINT"
    assert run["interrupted"]["during"] == "watching the start of sglang-k26-ddtree (attempt 1)"
    assert "left as it was" in run["interrupted"]["service"]
    (attempt,) = run["attempts"]
    assert (attempt["n"], attempt["verdict"], attempt["action"]) == (1, "interrupted", "interrupted")
    assert os.path.exists(os.path.join(run_dir, attempt["trace"]))
    # the folder is a run the report accepts
    from sglang_ops_cli.commands import report
    import argparse
    import io
    out, err_text = io.StringIO(), io.StringIO()
    assert report.run(argparse.Namespace(path=run_dir, output=None), out=out, err=err_text) == 0, err_text.getvalue()
    assert "interrupt" in out.getvalue().lower()


def _age_lock(tmp_path, seconds):
    """The lock file as its holder left it `seconds` ago (its mtime, what the host reads)."""
    path = tmp_path / "run" / "restart.lock"
    then = os.stat(path).st_mtime - seconds
    os.utime(path, (then, then))


def test_the_lock_states_how_long_it_may_go_unrenewed():
    rec = holder(pid=1)
    assert rec["renew_every_s"] == host_lock.RENEW_EVERY_S
    # renewal period + the longest single step (a stop of 330 s and its systemctl bound) + margin
    assert rec["stale_after_s"] == host_lock.RENEW_EVERY_S + 360 + host_lock.STALE_MARGIN_S
    assert rec["stale_after_s"] < (rec["expires_epoch_s"] - rec["started_epoch_s"]) / 10
    prewarm = host_lock.holder_record(dict(ARGS, prewarm={"step_s": 900}), "/a", 0.0, pid=1)
    assert prewarm["stale_after_s"] == host_lock.RENEW_EVERY_S + 900 + host_lock.STALE_MARGIN_S


def test_a_lock_its_holder_stopped_renewing_is_taken_over_by_any_controller(tmp_path):
    gone = lock_of(tmp_path, holder(pid=4242, controller="ctl-a"))   # a process of another controller
    gone.acquire()
    other = lock_of(tmp_path, holder(pid=os.getpid(), controller="ctl-b", user="bob"), controller="ctl-b")
    _age_lock(tmp_path, gone.holder["stale_after_s"] - 30)
    with pytest.raises(LockHeld) as err:                          # still within its bound: respected
        other.acquire()
    assert "without a renewal (last renewed" in str(err.value) and "stale," not in str(err.value)
    _age_lock(tmp_path, 60)                                       # now past it
    old, why = other.acquire()
    assert old["run_id"] == gone.holder["run_id"]
    assert why.startswith("it was not renewed for ") and "stale after 12m" in why
    assert json.loads((tmp_path / "run" / "restart.lock").read_text())["controller"] == "ctl-b"


def test_a_running_restart_renews_its_lock_between_polls_and_keeps_it(tmp_path):
    clock = [0.0]
    running = lock_of(tmp_path, holder(pid=4242, controller="ctl-a"))
    running.acquire()
    _age_lock(tmp_path, running.holder["stale_after_s"] + 100)    # as if it had not been renewed
    running.sleep(5, clock=lambda: clock[0], wait=lambda s: None)  # not due yet: nothing runs
    assert time_since_renewal(tmp_path) > running.holder["stale_after_s"]
    clock[0] = time.monotonic() + host_lock.RENEW_EVERY_S
    running.sleep(5, clock=lambda: clock[0], wait=lambda s: None)
    assert time_since_renewal(tmp_path) < 5 and running.renew_problem is None
    other = lock_of(tmp_path, holder(pid=os.getpid(), controller="ctl-b"), controller="ctl-b")
    with pytest.raises(LockHeld):
        other.acquire()


def test_status_shows_the_renewal_and_a_stale_lock(tmp_path):
    lock_of(tmp_path, holder(pid=4242, controller="ctl-a")).acquire()
    _age_lock(tmp_path, 13 * 60)
    state, now, rec = host_lock.parse_answer(local_shell(host_lock.peek_cmd(str(tmp_path / "run")))[1])
    assert state == "HELD" and abs(now - 13 * 60 - rec["renewed_epoch_s"]) < 5
    text = host_lock.describe(rec, now)
    assert "or 12m00s without a renewal (last renewed 13m00s ago" in text
    assert text.endswith("stale, its holder's process is gone; the next restart takes it over)")


def time_since_renewal(tmp_path):
    return time.time() - os.stat(tmp_path / "run" / "restart.lock").st_mtime


def test_status_names_a_stale_lock_and_would_take_it_over_a_live_one_would_refuse(tmp_path):
    host = LockingHost()
    lock_of(tmp_path, holder(pid=4242, controller="ctl-a")).acquire()
    proc, host, dummy_probe, dummy_clock, lines, dummy_detectors = make_procedure(
        tmp_path, [[progressing()]], host=host)
    proc.lock = HostLock(host.shell, holder(pid=os.getpid(), controller="ctl-b"), lock_dir=str(tmp_path / "run"),
                         controller="ctl-b")
    assert proc.observe_once()["would"].startswith("would refuse: another restart holds the host: alice@ctl-a")
    _age_lock(tmp_path, 13 * 60)
    proc, host, dummy_probe, dummy_clock, lines, dummy_detectors = make_procedure(
        tmp_path, [[progressing()]], host=host)
    proc.lock = HostLock(host.shell, holder(pid=os.getpid(), controller="ctl-b"), lock_dir=str(tmp_path / "run"),
                         controller="ctl-b")
    assert proc.observe_once()["would"].startswith("would stop sglang-k26-ddtree")
    said = [line for line in lines if line.startswith("restart lock: alice@ctl-a (PID 4242)")]
    assert len(said) == 1 and "stale (it was not renewed for 13m" in said[0] and "would take it over" in said[0]
