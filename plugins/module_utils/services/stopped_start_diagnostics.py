"""What on-call needs from a supervised start that is about to be stopped, written into the
start's folder (records/start_records.py) before the server is: the tail of its log, its
processes, one py-spy dump of its ranks, nvidia-smi, and the assessment with the last
observation that decided it."""
import json

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import bounded_run, nvidia_smi, procfs, pyspy
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import sglang_dialect

# The bound of each command run for the diagnostics (py-spy, nvidia-smi).
COMMAND_S = 10.0


def write_diagnostics(record, server, settings, assessment, last_obs):
    """The diagnostics of the start into record (a start_records.StartRecord); server: the
    server_process.ServerProcess, its child and pump None when it was never spawned."""
    record.write_diagnostic("log-tail", server.pump.tail_text() if server.pump else "")
    pids = procfs.descendants(server.child.pid) if server.child else []
    record.write_diagnostic("processes", "".join(
        "%d %s\n" % (pid, procfs.read_cmdline(pid) or "?") for pid in pids))
    targets = [(pid, sglang_dialect.rank_of(procfs.read_cmdline(pid) or "")) for pid in pids]
    targets = [(pid, rank) for pid, rank in targets if rank] or [(pid, None) for pid in pids[:1]]
    samples, why = pyspy.dump_stacks(targets, settings.venv_bin, COMMAND_S) if targets else (None, "no process")
    record.write_diagnostic("py-spy", json.dumps(samples, indent=1) if samples is not None else "py-spy: %s\n" % why)
    exe = bounded_run.find_executable(settings.nvidia_smi, nvidia_smi.EXTRA_DIRS)
    res = bounded_run.bounded_run([exe], COMMAND_S) if exe else None
    record.write_diagnostic("nvidia-smi", res.stdout if res is not None and res.ok else "nvidia-smi: %s\n" % (
        "not found" if res is None else "timed out" if res.timed_out else (res.stderr.strip() or "failed")))
    record.write_diagnostic("assessment", json.dumps({"assessment": assessment, "last_observation": last_obs},
                                                     indent=1, default=str))
