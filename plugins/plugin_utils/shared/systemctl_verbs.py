"""The systemctl verbs the restart runs on the target: start, stop, kill, daemon-reload
(and kill -9 of leftover processes), and the one restart of a supervised unit, as quoted
shell commands, each with the bound of its
remote step. What the restart reads of the host comes from the probe (port.read, port.probe).
"""
import shlex

from ansible_collections.sglang_ops.serving.plugins.module_utils.host.systemd_unit import service_name

# systemctl start waits this long for the start job (Type=exec/simple: until the process
# runs); a unit whose start job waits longer (Type=notify) is left to the watch.
START_JOB_WAIT_S = 60
START_STEP_TIMEOUT_S = 90       # the remote step around `systemctl start`
STOP_STEP_MARGIN_S = 30         # the remote step around `systemctl stop`: its own timeout plus this
CANCEL_RESTART_STOP_S = 30      # the stop that cancels a pending Restart= of systemd
KILL_STEP_TIMEOUT_S = 60        # systemctl kill --signal=SIGKILL, daemon-reload
KILL_PIDS_TIMEOUT_S = 30        # kill -9 of leftover processes
RESTART_STEP_TIMEOUT_S = 120    # the one restart of a supervised unit, not waited for

DAEMON_RELOAD_CMD = "systemctl daemon-reload"


def _after_reset_failed(q, command):
    """reset-failed first, so a failed unit (or one at its start limit) can start again."""
    return "systemctl reset-failed -- %s 2>/dev/null; %s" % (q, command)


def start_cmd(unit, timeout_s=START_JOB_WAIT_S):
    """Start and wait for the start job, so the first observation never sees the state
    from before the start."""
    q = shlex.quote(service_name(unit))
    return _after_reset_failed(q, "timeout %d systemctl start -- %s" % (max(1, int(timeout_s)), q))


def stop_cmd(unit, timeout_s):
    return "timeout %d systemctl stop -- %s" % (max(1, int(timeout_s)), shlex.quote(service_name(unit)))


def kill_unit_cmd(unit):
    return "systemctl kill --signal=SIGKILL -- %s" % shlex.quote(service_name(unit))


def restart_no_block_cmd(unit):
    """One restart of a supervised unit, not waited for (a Type=notify start returns only
    at READY=1)."""
    q = shlex.quote(service_name(unit))
    return _after_reset_failed(q, "systemctl restart --no-block -- %s" % q)


def kill_pids_cmd(pids):
    return "kill -9 %s" % " ".join(str(int(p)) for p in pids)


def verb_command(name, unit, timeout_s=None, pids=()):
    """(shell command, bound of its remote step) of one verb: start, stop (timeout_s),
    kill, daemon-reload, kill-pids (pids), restart-no-block; ValueError for another name."""
    if name == "start":
        return start_cmd(unit), START_STEP_TIMEOUT_S
    if name == "stop":
        return stop_cmd(unit, timeout_s), timeout_s + STOP_STEP_MARGIN_S
    if name == "kill":
        return kill_unit_cmd(unit), KILL_STEP_TIMEOUT_S
    if name == "daemon-reload":
        return DAEMON_RELOAD_CMD, KILL_STEP_TIMEOUT_S
    if name == "kill-pids":
        return kill_pids_cmd(pids), KILL_PIDS_TIMEOUT_S
    if name == "restart-no-block":
        return restart_no_block_cmd(unit), RESTART_STEP_TIMEOUT_S
    raise ValueError("unknown systemctl verb %r" % name)
