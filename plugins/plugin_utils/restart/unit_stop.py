"""Stopping the unit before a start, and confirming it is really down: `systemctl stop`
(systemd sends SIGTERM, then SIGKILL after the unit's TimeoutStopSec=), SIGKILL to the
unit's processes when the stop does not finish within its timeout, then bounded by
release_timeout_s: every process of the unit gone (SIGKILL again each poll while any is
left), systemd settled, and the GPUs back to baseline (leftover server processes killed
when kill_orphans allows it).
"""
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared import host_checks, systemctl_verbs

RELEASE_POLL_S = 2.0
SETTLE_NUDGE_S = 10.0


class UnitStop:
    """Stops run.unit and waits until it released the host. weights: the run's
    WarmColdPlan (the weight cache daemon's processes are expected on the GPUs)."""

    def __init__(self, run, weights):
        self.run = run
        self.weights = weights

    def stop_and_release(self, timeout_s):
        """Stop the unit and wait (bounded) until its cgroup is empty and the GPUs are
        back to baseline. None when done, else (reason_code, reason)."""
        run = self.run
        run.access.emit("stopping %s (timeout %.0f s)" % (run.unit, timeout_s))
        rc, dummy_out, dummy_err = run.access.verb("stop", timeout_s=timeout_s)
        run.changed = True
        if rc != 0:
            run.access.emit("stop did not finish (rc %s): sending SIGKILL to the unit's processes" % rc)
            run.access.verb("kill")
        deadline = run.access.clock() + run.args["release_timeout_s"]
        return self._processes_gone(deadline) or self._settled(deadline) or self._gpus_released(deadline)

    def gpu_check(self):
        """The GPU holders now, classified (the daemon's processes read again: a cold restart
        replaces them)."""
        result = self.run.read("GPU holder listing", "gpu_holders", holders=True,
                               gpu_timeout_s=host_checks.NVIDIA_SMI_TIMEOUT_S)
        self.weights.read_daemon()
        return self.run.classified(result["gpu_holders"])

    def _processes_gone(self, deadline):
        run = self.run
        while True:
            left = run.read("process listing", "unit_processes", unit_processes=True)["unit_processes"]
            if not left:
                return None
            if run.access.clock() >= deadline:
                return ("gpu_not_released", "processes of %s survived stop and SIGKILL: %s" % (
                    run.unit, "; ".join("PID %(pid)d (state %(state)s): %(cmdline)s" % p for p in left)))
            run.access.verb("kill")
            run.access.sleep(RELEASE_POLL_S)

    def _settled(self, deadline):
        """systemd done with the stop: no restart of its own pending, the unit inactive or failed."""
        run = self.run
        settle_began, nudged = run.access.clock(), False
        while True:
            state = run.read("reading the unit's state", "unit_state", unit_state=True)["unit_state"]
            if host_checks.settled_after_stop(state):
                return None
            if host_checks.restart_pending(state):
                # systemd's own Restart= fired meanwhile: cancel it, the procedure starts.
                run.access.verb("stop", timeout_s=systemctl_verbs.CANCEL_RESTART_STOP_S)
            elif not nudged and run.access.clock() - settle_began >= SETTLE_NUDGE_S:
                # The processes are gone (checked before) but systemd still waits for the
                # cgroup-empty notice, which some container setups never deliver; a
                # daemon-reload makes it look at the cgroup again.
                run.access.emit("no process left but %s is still %s/%s: daemon-reload so systemd sees it" % (
                    run.unit, state["active"], state["sub"]))
                run.access.verb("daemon-reload")
                nudged = True
            if run.access.clock() >= deadline:
                return ("gpu_not_released", "%s did not settle after stop (ActiveState=%s, SubState=%s)" % (
                    run.unit, state["active"], state["sub"]))
            run.access.sleep(RELEASE_POLL_S)

    def _gpus_released(self, deadline):
        """No process outside the unit on the GPUs, leftovers killed when allowed, memory back to baseline."""
        run = self.run
        run.record["preflight"].setdefault("orphans_killed", [])
        while True:
            check = self.gpu_check()
            foreign = check.of_kind("foreign")
            if foreign:
                return ("gpu_busy_foreign", "GPUs held by processes outside %s: %s" % (
                    run.unit, "; ".join(h.describe() for h in foreign)))
            orphans = check.of_kind("orphan")
            if orphans:
                if not run.args["kill_orphans"]:
                    return ("orphan_processes", "leftover server processes hold GPU memory after stop: %s "
                            "(set kill_orphans: true to kill them)" % "; ".join(h.describe() for h in orphans))
                run.kill_orphans(orphans)
            released, why = host_checks.gpu_released(check, run.args["gpu_idle_mib"])
            if released and not orphans:
                return None
            if run.access.clock() >= deadline:
                return ("gpu_not_released", why or "GPU memory not back to baseline")
            run.access.sleep(RELEASE_POLL_S)
