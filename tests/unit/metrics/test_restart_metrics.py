"""The restart procedure writes the metrics file on the host every poll and at the end."""
import os
import subprocess

from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_metrics import file_name
from ansible_collections.sglang_ops.serving.tests.unit.restart.restart_fakes import (
    UNIT, FakeHost, make_procedure, progressing, ready, stalled)


class HostWithFiles(FakeHost):
    """The scripted host, with the metrics file commands run for real by sh."""

    def __init__(self, metrics_dir, **kw):
        super().__init__(**kw)
        self.metrics_dir = metrics_dir
        self.metric_writes = []

    def shell(self, cmd, timeout_s=None):
        if self.metrics_dir in cmd:
            p = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=timeout_s, check=False)
            if "mv -f" in cmd:
                with open(os.path.join(self.metrics_dir, file_name(UNIT))) as fh:
                    self.metric_writes.append(fh.read())
            return p.returncode, p.stdout, p.stderr
        return super().shell(cmd, timeout_s)


def value(text, line_start):
    found = [line.rsplit(" ", 1)[1] for line in text.splitlines() if line.startswith(line_start)]
    assert len(found) == 1, (line_start, text)
    return float(found[0])


def test_every_poll_and_the_end_of_the_run_are_in_the_metrics_file(tmp_path):
    folder = str(tmp_path / "textfile")
    host = HostWithFiles(folder)
    proc, *_rest = make_procedure(tmp_path, [[progressing(), stalled("stall_idle")], [progressing(), ready()]],
                                  host=host, metrics_dir=folder)
    res = proc.restart()
    assert res["outcome"] == "ready"
    assert os.listdir(folder) == [file_name(UNIT)]           # no temporary left behind
    during = host.metric_writes[0]
    assert value(during, "sglang_start_in_progress{") == 1
    assert value(during, 'sglang_start_phase{host="gpu-host-1",phase="weight_load"') == 1
    final = host.metric_writes[-1]
    assert value(final, "sglang_start_in_progress{") == 0
    assert value(final, 'sglang_restarts_total{host="gpu-host-1",reason_code="stall_idle"') == 1
    assert value(final, 'sglang_last_start_info{host="gpu-host-1",outcome="ready",reason_code="ready"') == 1
    assert value(final, "sglang_last_start_attempts{") == 2
    assert value(final, "sglang_last_start_needed_human{") == 0
    # 2 polls per attempt and the restart and the end of the run
    assert len(host.metric_writes) == 6


def test_counters_carry_on_into_the_next_run_and_a_give_up_needs_a_human(tmp_path):
    folder = str(tmp_path / "textfile")
    for script in ([[stalled("stall_idle")], [ready()]], [[stalled("stall_spin")]]):
        host = HostWithFiles(folder)
        proc, *_rest = make_procedure(tmp_path, script, host=host, metrics_dir=folder)
        res = proc.restart()
    assert res["outcome"] == "gave_up"
    final = host.metric_writes[-1]
    assert value(final, 'sglang_restarts_total{host="gpu-host-1",reason_code="stall_idle"') == 1
    assert value(final, 'sglang_starts_total{host="gpu-host-1",unit="%s",verdict="stalled"}' % UNIT) == 2
    assert value(final, "sglang_last_start_needed_human{") == 1


def test_without_a_metrics_dir_nothing_is_written_on_the_host(tmp_path):
    host = FakeHost()
    proc, *_rest = make_procedure(tmp_path, [[progressing(), ready()]], host=host)
    proc.restart()
    assert not [c for c in host.commands if "prom" in c]


def test_a_metrics_file_that_cannot_be_written_is_said_once_and_the_restart_goes_on(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    host = HostWithFiles(str(blocker))
    proc, _host, _probe, _clock, lines, _d = make_procedure(tmp_path, [[progressing(), progressing(), ready()]],
                                                            host=host, metrics_dir=str(blocker))
    assert proc.restart()["outcome"] == "ready"
    assert len([line for line in lines if line.startswith("metrics file not written")]) == 1
