"""Whether the server's main process is gone, and the words saying why. Pure, no I/O.

systemd's view of the unit (state, main PID, restart count), an empty cgroup, or systemd's
own "Main process exited" line in the journal each say the process went; the exit status, where
the journal gave one, leads the words. A dead process is the detector's own evidence (rule 1
names it after the line it confirms).
"""

DEAD_ACTIVE = ("failed", "inactive", "deactivating")
DEAD_SUB = ("dead", "failed", "auto-restart", "exited", "stop", "stop-sigterm", "stop-sigkill", "stop-post", "final-sigterm", "final-sigkill")


class MainProcessWatch:
    """The main PID and restart count of the start's first readings, against which later ones are read."""

    def __init__(self):
        self._main_pid = None
        self._restarts = None

    @property
    def main_pid(self):
        """The main PID of the start's first readings, None while unknown (pid mode)."""
        return self._main_pid

    def gone(self, obs, facts, later_poll):
        """Words saying why the main process is gone, or None while it runs. `facts` gets the
        unit's state and holds the journal's exit line (log_reading.py); `later_poll`: not the
        start's first observation (an empty cgroup then is a start not yet begun)."""
        unit = obs.get("unit")
        why = None
        if isinstance(unit, dict):
            why = self._unit_gone(unit)
            facts["unit"] = "%s/%s" % (unit.get("active"), unit.get("sub"))
        procs = obs.get("procs")
        if why is None and isinstance(procs, dict) and procs.get("count") == 0 and later_poll:
            why = "no process left in the unit's cgroup"
        if why is None and facts.get("exit_status"):
            why = "journal: %s" % facts["main_exited_line"]
        if why is None:
            return None
        status = facts.get("exit_status")
        if status:
            why = "main process exited with status %s%s; %s" % (
                status, " (reported as success)" if status.startswith("0") else "", why)
        return "server process exited: " + why

    def _unit_gone(self, unit):
        """What systemd's view of the unit says: the words of a gone main process, or None."""
        active, sub = unit.get("active"), unit.get("sub")
        pid, restarts = unit.get("main_pid"), unit.get("restarts")
        if self._restarts is None and restarts is not None:
            self._restarts = restarts
        if self._main_pid is None and pid:
            self._main_pid = pid
        if active in DEAD_ACTIVE or sub in DEAD_SUB:
            return "unit is %s/%s" % (active, sub)
        if restarts is not None and self._restarts is not None and restarts > self._restarts:
            return "systemd restarted the unit (NRestarts %s -> %s)" % (self._restarts, restarts)
        if pid and self._main_pid and pid != self._main_pid:
            return "main PID changed %s -> %s" % (self._main_pid, pid)
        if active == "active" and not pid and self._main_pid:
            return "main process gone (unit active, no main PID)"
        return None
