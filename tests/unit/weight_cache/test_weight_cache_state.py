"""daemon_health on real ready files in a temporary folder and real processes."""
import subprocess
import sys

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import weight_cache_state as wcs

UUIDS = ["GPU-aaaa-0000", "GPU-bbbb-1111"]


@pytest.fixture
def template(tmp_path):
    return str(tmp_path / "sglang_weight_cache_{device_uuid}.ready")


@pytest.fixture
def sleeper():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def _write_ready(tmp_path, uuid, pid):
    path = tmp_path / ("sglang_weight_cache_%s.ready" % uuid.removeprefix("GPU-"))
    path.write_text("pid=%d\nconfig={'tp_size': 2}\n" % pid)
    return path


def _dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_every_gpu_with_a_live_daemon_is_healthy(tmp_path, template, sleeper):
    for uuid in UUIDS:
        _write_ready(tmp_path, uuid, sleeper.pid)
    health = wcs.daemon_health(template, UUIDS)
    assert health.healthy and health.reason == "" and health.missing == ()
    assert health.pids == {uuid: sleeper.pid for uuid in UUIDS}
    assert health.configs[UUIDS[0]] == "{'tp_size': 2}"


def test_a_gpu_without_its_ready_file_is_not_healthy_and_named(tmp_path, template, sleeper):
    _write_ready(tmp_path, UUIDS[0], sleeper.pid)
    health = wcs.daemon_health(template, UUIDS)
    assert not health.healthy
    assert health.missing == (UUIDS[1],)
    assert "1 of 2 GPUs" in health.reason and "no ready file" in health.reason


def test_a_ready_file_whose_daemon_is_gone_is_not_healthy(tmp_path, template, sleeper):
    _write_ready(tmp_path, UUIDS[0], sleeper.pid)
    dead = _dead_pid()
    _write_ready(tmp_path, UUIDS[1], dead)
    health = wcs.daemon_health(template, UUIDS)
    assert not health.healthy and health.missing == (UUIDS[1],)
    assert "daemon pid %d" % dead in health.reason and "gone" in health.reason


def test_a_daemon_killed_after_ready_turns_the_health_off(tmp_path, template, sleeper):
    for uuid in UUIDS:
        _write_ready(tmp_path, uuid, sleeper.pid)
    assert wcs.daemon_health(template, UUIDS).healthy
    sleeper.kill()
    sleeper.wait()
    assert not wcs.daemon_health(template, UUIDS).healthy


def test_a_zombie_daemon_is_not_alive():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    # not reaped yet: a zombie until wait()
    import time
    deadline = time.monotonic() + 10
    while wcs.pid_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive_as_zombie = wcs.pid_alive(proc.pid)
    proc.wait()
    assert not alive_as_zombie


def test_a_ready_file_without_a_pid_is_not_healthy(tmp_path, template):
    (tmp_path / "sglang_weight_cache_aaaa-0000.ready").write_text("config={}\n")
    health = wcs.daemon_health(template, UUIDS[:1])
    assert not health.healthy and "names no pid" in health.reason


def test_settings_faults_are_refused_loudly(tmp_path, template):
    with pytest.raises(ValueError, match="device_uuid"):
        wcs.daemon_health(str(tmp_path / "ready"), UUIDS)
    with pytest.raises(ValueError, match="uuids"):
        wcs.daemon_health(template, [])
