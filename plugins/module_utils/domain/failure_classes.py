"""The verdict vocabulary: the verdicts the detector gives, and the failure classes it
names with whether a restart can fix each.

One table, keyed by reason code. The detector reports these codes, the restart action
asks `restart_helps` before restarting, and docs/runbook.md has one section per code
(anchor = the code), so all three stay in step (tests/unit/test_failure_classes.py).
"""
from dataclasses import dataclass

# What the detector says of each observation; the last three end a watch. "observing": an
# observe-only start (rule 4, docs/detector.md) that would have been stopped, watched on.
VERDICTS = ("progressing", "quiet", "suspect", "observing", "stalled", "failed", "ready")
FINAL_VERDICTS = ("ready", "stalled", "failed")
# Reason codes of the verdicts that are not failure classes.
INTERIM_CODES = ("starting", "progressing", "quiet", "suspect_spin", "suspect_idle", "observe_only", "ready",
                 "waiting_peer")
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
    # The exit status of the unit's supervisor when a start ends in this class (None: the
    # supervisor never ends with it). systemd restarts a unit for every status except
    # those of classes a restart cannot help (RestartPreventExitStatus=).
    exit_code: object = None
    # The failure points at the weights on the GPUs or at the GPUs themselves (a damaged
    # checkpoint, an illegal memory access while repacking, NCCL, a wedged GPU, the weight
    # cache daemon gone): the next restart must load the weights again (a cold restart,
    # domain/weight_cache.py), never re-attach to the weight cache daemon's copy.
    implicates_weights: bool = False


_CLASSES = (
    # Fatal log lines: decided within one poll.
    FailureClass("fatal_oom", "failed", "GPU out of memory", False,
                 "the same configuration runs out of memory again; lower --mem-fraction-static, "
                 "context length or CUDA graph batch sizes", exit_code=80),
    FailureClass("fatal_port_in_use", "failed", "HTTP port already in use", True,
                 "helps once whatever holds the port is gone", exit_code=72),
    FailureClass("fatal_gpu_occupied", "failed", "GPU memory held by other processes", True,
                 "helps after the leftover processes holding GPU memory are killed", exit_code=73),
    FailureClass("fatal_cuda_graph", "failed", "CUDA graph capture failed", False,
                 "capture fails the same way; disable or shrink CUDA graphs", exit_code=81),
    FailureClass("fatal_warmup", "failed", "warmup request failed", False,
                 "the model cannot serve a request with this configuration", exit_code=82),
    FailureClass("fatal_packing", "failed", "error while repacking weights", True,
                 "seen as transient in the incident: the next start came up", exit_code=74, implicates_weights=True),
    FailureClass("fatal_checkpoint", "failed", "checkpoint unreadable or truncated", False,
                 "the files on disk are damaged; re-download or restore them", exit_code=83, implicates_weights=True),
    FailureClass("fatal_nccl", "failed", "NCCL / distributed error", False,
                 "usually a host problem (P2P, IOMMU/ACS, a wedged GPU)", exit_code=84, implicates_weights=True),
    FailureClass("fatal_watchdog", "failed", "scheduler watchdog timeout", False,
                 "a rank hung inside a collective; the host needs a look", exit_code=85, implicates_weights=True),
    FailureClass("fatal_error", "failed", "fatal error in the server log", True,
                 "unknown cause; one restart is worth trying", exit_code=71),
    FailureClass("process_exited", "failed", "server process exited", True,
                 "the process died (exit 0 included); one restart is worth trying", exit_code=70),
    FailureClass("child_died", "failed", "a rank of the server died while the start went on", True,
                 "a scheduler process was killed (the kernel's OOM killer, a signal) or exited; the launcher may "
                 "wait for it forever; one restart is worth trying, a second death needs a look at host memory",
                 exit_code=89),
    FailureClass("peer_missing", "failed", "another node of the server never joined the rendezvous", False,
                 "this node waited for the node named up to the rendezvous's timeout; restarting this node cannot "
                 "bring the other: on-call starts or repairs the node named", exit_code=90),
    FailureClass("weight_cache_daemon_died", "failed", "the weight cache daemon died", True,
                 "the engine logged that the daemon holding its weights died (it kills itself then), or the "
                 "supervisor of the daemon unit found a daemon process gone; a cold restart (daemon, then "
                 "engine) loads the weights again", exit_code=79, implicates_weights=True),
    FailureClass("hang_after_ready", "failed", "server stopped answering after ready", True,
                 "generation hangs; a restart clears a wedged scheduler", exit_code=75),
    # Stalls: nothing moves and a positive sign of waiting is present.
    FailureClass("stall_spin", "stalled", "GPUs spinning with nothing moving (hung collective)", False,
                 "NCCL init / P2P / all-reduce hangs come back; fix the host or flags", exit_code=86, implicates_weights=True),
    FailureClass("stall_idle", "stalled", "every signal flat", True,
                 "a stalled read or a lost wake-up; a fresh start usually proceeds", exit_code=76),
    FailureClass("stall_wait_stacks", "stalled", "all ranks parked in a wait (py-spy)", True,
                 "ranks wait on each other; a fresh start usually proceeds", exit_code=77),
    FailureClass("stall_no_progress", "stalled", "no progress for the longest allowed window", True,
                 "no positive signature, only a very long silence", exit_code=78),
    FailureClass("stall_observe_ceiling", "stalled", "an observe-only start reached its ceiling without becoming ready",
                 False, "the earlier starts ended the same way and this one, left alone, did not come up either: "
                 "a restart does not help, a human looks", exit_code=88),
    # Found before starting (preflight) or after stopping.
    FailureClass("gpu_busy_foreign", "preflight", "GPUs held by processes outside the unit", False,
                 "someone else's process; a human decides whether to kill it"),
    FailureClass("orphan_processes", "preflight", "leftover server processes hold GPUs", True,
                 "helps after the orphans are killed (allowed by sglang_restart_kill_orphans)"),
    FailureClass("gpu_not_released", "preflight", "GPU memory not released after stop", False,
                 "a process survived SIGKILL or the GPU is wedged; reset the GPU or reboot",
                 implicates_weights=True),
    FailureClass("unit_missing", "preflight", "systemd unit not installed", False,
                 "run playbooks/site.yml first"),
    FailureClass("unit_held", "preflight", "on-call holds the unit", False,
                 "a human paused the automation on this host; nothing restarts it until the hold is released"),
    # The automation itself could not do its job on the host.
    FailureClass("restart_locked", "preflight", "another restart of this host is running", False,
                 "two restarts of one host would stop each other's start; wait for the other, or break a dead one's lock"),
    FailureClass("remote_step_failed", "preflight", "a step of the restart failed on the host", False,
                 "stopping or starting the unit failed; a human looks at the host first"),
    FailureClass("supervisor_config", "preflight", "the unit's supervisor cannot start the server", False,
                 "its settings file is missing or invalid, or the server cannot be executed; re-run playbooks/site.yml",
                 exit_code=64),
    FailureClass("supervisor_fault", "failed", "the unit's supervisor failed (an internal error)", False,
                 "a fault of the supervisor, not of the server: its journal line names the exception; the server "
                 "was stopped; report it, then start the unit by hand", exit_code=65),
    # A server spread over several hosts restarts as one (plugin_utils/restart/server_sync.py).
    FailureClass("server_node_gave_up", "preflight", "another node of the server could not go on", False,
                 "the server restarts as one; the node named gave up first, its own report says why"),
    FailureClass("server_node_supervised", "preflight", "a node of the server runs under the unit supervisor",
                 False, "the supervisor decides for one host; set sglang_service_supervisor: false on every node"),
    FailureClass("option_not_applicable", "preflight", "a restart option has no effect on a supervised unit", False,
                 "the unit's supervisor decides every start; set its own setting (sglang_service_*) or drop the option"),
    FailureClass("probe_error", "stalled", "the probe could not observe the host", False,
                 "without observations nothing can be decided; fix access to the host first", exit_code=87),
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


def implicates_weights(code):
    """The class points at the weights on the GPUs or at the GPUs: restart cold."""
    return failure_class(code).implicates_weights


def weight_implicating_codes():
    """The reason codes whose restart must be cold, sorted."""
    return sorted(c.code for c in _CLASSES if c.implicates_weights)


def exit_code(code):
    """The supervisor's exit status for a reason code; KeyError when it never exits with it."""
    status = failure_class(code).exit_code
    if status is None:
        raise KeyError("the supervisor never ends a start with %r" % code)
    return status


def class_of_exit_code(status):
    """The class a supervisor exit status stands for, or None."""
    for c in _CLASSES:
        if c.exit_code is not None and c.exit_code == status:
            return c
    return None


def supervisor_exit_classes():
    """The classes the supervisor can end a start with, by exit status."""
    return sorted((c for c in _CLASSES if c.exit_code is not None), key=lambda c: c.exit_code)


def restart_prevent_exit_statuses():
    """Exit statuses after which systemd must not restart the unit (a restart cannot help)."""
    return [c.exit_code for c in supervisor_exit_classes() if not c.restart_helps]


def exit_status_table():
    """The supervisor's exit statuses as the Markdown table docs/runbook.md carries
    (a unit test keeps the two equal)."""
    rows = ["| exit status | reason code | what | systemd restarts the unit |",
            "| --- | --- | --- | --- |"]
    for c in supervisor_exit_classes():
        rows.append("| %d | [`%s`](#%s) | %s | %s |" % (
            c.exit_code, c.code, c.code, c.title, "yes" if c.restart_helps else "no (RestartPreventExitStatus)"))
    return "\n".join(rows) + "\n"
