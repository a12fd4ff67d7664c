"""The verdict vocabulary: the verdicts the detector gives, and the failure classes it
names with whether a restart can fix each.

One table, keyed by reason code. The detector reports these codes, the restart action
asks `restart_helps` before restarting, and docs/runbook.md has one section per code
(anchor = the code), so all three stay in step (tests/unit/test_failure_classes.py).
"""
from dataclasses import dataclass

# What the detector says of each observation; the last three end a watch.
VERDICTS = ("progressing", "quiet", "suspect", "stalled", "failed", "ready")
FINAL_VERDICTS = ("ready", "stalled", "failed")
# Reason codes of the verdicts that are not failure classes.
INTERIM_CODES = ("starting", "progressing", "quiet", "suspect_spin", "suspect_idle", "ready")
# The watch's own verdict when it could not observe the host (a failure class, below).
PROBE_ERROR = "probe_error"
# The detector called the start ready; the watch waits for a completion to answer.
READY_PENDING = "ready_pending"
# A replay or report whose trace ended before a final verdict.
UNDECIDED = "undecided"


@dataclass(frozen=True)
class FailureClass:
    code: str
    verdict: str  # "failed", "stalled" or "preflight"
    title: str
    restart_helps: bool
    why: str


_CLASSES = (
    # Fatal log lines: decided within one poll.
    FailureClass("fatal_oom", "failed", "GPU out of memory", False,
                 "the same configuration runs out of memory again; lower --mem-fraction-static, "
                 "context length or CUDA graph batch sizes"),
    FailureClass("fatal_port_in_use", "failed", "HTTP port already in use", True,
                 "helps once whatever holds the port is gone"),
    FailureClass("fatal_gpu_occupied", "failed", "GPU memory held by other processes", True,
                 "helps after the leftover processes holding GPU memory are killed"),
    FailureClass("fatal_cuda_graph", "failed", "CUDA graph capture failed", False,
                 "capture fails the same way; disable or shrink CUDA graphs"),
    FailureClass("fatal_warmup", "failed", "warmup request failed", False,
                 "the model cannot serve a request with this configuration"),
    FailureClass("fatal_packing", "failed", "error while repacking weights", True,
                 "seen as transient in the incident: the next start came up"),
    FailureClass("fatal_checkpoint", "failed", "checkpoint unreadable or truncated", False,
                 "the files on disk are damaged; re-download or restore them"),
    FailureClass("fatal_nccl", "failed", "NCCL / distributed error", False,
                 "usually a host problem (P2P, IOMMU/ACS, a wedged GPU)"),
    FailureClass("fatal_watchdog", "failed", "scheduler watchdog timeout", False,
                 "a rank hung inside a collective; the host needs a look"),
    FailureClass("fatal_error", "failed", "fatal error in the server log", True,
                 "unknown cause; one restart is worth trying"),
    FailureClass("process_exited", "failed", "server process exited", True,
                 "the process died (exit 0 included); one restart is worth trying"),
    FailureClass("hang_after_ready", "failed", "server stopped answering after ready", True,
                 "generation hangs; a restart clears a wedged scheduler"),
    # Stalls: nothing moves and a positive sign of waiting is present.
    FailureClass("stall_spin", "stalled", "GPUs spinning with nothing moving (hung collective)", False,
                 "NCCL init / P2P / all-reduce hangs come back; fix the host or flags"),
    FailureClass("stall_idle", "stalled", "every signal flat", True,
                 "a stalled read or a lost wake-up; a fresh start usually proceeds"),
    FailureClass("stall_wait_stacks", "stalled", "all ranks parked in a wait (py-spy)", True,
                 "ranks wait on each other; a fresh start usually proceeds"),
    FailureClass("stall_no_progress", "stalled", "no progress for the longest allowed window", True,
                 "no positive signature, only a very long silence"),
    # Found before starting (preflight) or after stopping.
    FailureClass("gpu_busy_foreign", "preflight", "GPUs held by processes outside the unit", False,
                 "someone else's process; a human decides whether to kill it"),
    FailureClass("orphan_processes", "preflight", "leftover server processes hold GPUs", True,
                 "helps after the orphans are killed (allowed by sglang_restart_kill_orphans)"),
    FailureClass("gpu_not_released", "preflight", "GPU memory not released after stop", False,
                 "a process survived SIGKILL or the GPU is wedged; reset the GPU or reboot"),
    FailureClass("unit_missing", "preflight", "systemd unit not installed", False,
                 "run playbooks/site.yml first"),
    # The automation itself could not do its job on the host.
    FailureClass("restart_locked", "preflight", "another restart of this host is running", False,
                 "two restarts of one host would stop each other's start; wait for the other, or break a dead one's lock"),
    FailureClass("remote_step_failed", "preflight", "a step of the restart failed on the host", False,
                 "stopping or starting the unit failed; a human looks at the host first"),
    FailureClass("probe_error", "stalled", "the probe could not observe the host", False,
                 "without observations nothing can be decided; fix access to the host first"),
)

FAILURE_CLASSES = {c.code: c for c in _CLASSES}


def failure_class(code):
    """The class for a reason code; KeyError names the unknown code."""
    try:
        return FAILURE_CLASSES[code]
    except KeyError:
        raise KeyError("unknown reason code %r (known: %s)" % (code, ", ".join(sorted(FAILURE_CLASSES))))


def restart_helps(code):
    return failure_class(code).restart_helps
