"""A server that exits while serving is named by the last lethal line it printed (the engine
whose weight cache daemon died says so before it kills itself), else process_exited."""
import os
import types

from ansible_collections.sglang_ops.serving.plugins.module_utils.services import log_pump
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.serving_liveness import exit_after_ready

DAEMON_DIED_LINE = (b"[2026-12-01 10:00:05 TP3] [IpcModelLoader] Weight cache daemon (pid=4242) died while this "
                    b"engine holds its weights via CUDA IPC. The mapped weight pointers are now dangling; continuing "
                    b"would read freed GPU memory. Terminating this process.\n")


def _exited_server(output, returncode=-9):
    """A supervisor's view of a server that printed output and exited: a real pump on a pipe."""
    read_fd, write_fd = os.pipe()
    sink = os.open(os.devnull, os.O_WRONLY)
    pump = log_pump.LogPump(read_fd, blank=[], out_fd=sink, clock=lambda: 0.0)
    pump.start()
    os.write(write_fd, output)
    os.close(write_fd)
    server = types.SimpleNamespace(pump=pump, child=types.SimpleNamespace(returncode=returncode))
    code, words = exit_after_ready(server)
    os.close(sink)
    return code, words


def test_an_engine_whose_daemon_died_is_named_by_its_own_line():
    code, words = _exited_server(b"[2026-12-01 10:00:00] INFO: 127.0.0.1 - POST /v1/completions 200\n" + DAEMON_DIED_LINE)
    assert code == "weight_cache_daemon_died"
    assert "status -9 after ready" in words and "Weight cache daemon (pid=4242) died" in words


def test_the_daemons_death_is_named_over_the_generic_failure_lines_after_it():
    generic = (b"[2026-12-01 10:00:06] Child process unexpectedly failed with exitcode=-9. pid=77\n"
               b"[2026-12-01 10:00:06] RuntimeError: the scheduler died\n")
    code, dummy_words = _exited_server(DAEMON_DIED_LINE + generic)
    assert code == "weight_cache_daemon_died"


def test_a_server_that_exits_without_a_lethal_line_is_process_exited():
    code, words = _exited_server(b"[2026-12-01 10:00:00] INFO: 127.0.0.1 - POST /v1/completions 200\n", returncode=0)
    assert (code, words) == ("process_exited", "the server exited with status 0 after ready")
