"""The preflight of a restart: read the host before anything changes (the unit, who holds
the GPUs, the weight cache daemon, the restart lock) and decide whether a restart must
refuse it. A real run and check mode make the same decisions from the same reads.
"""
from ansible_collections.sglang_ops.serving.plugins.module_utils.host import systemd_unit
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import host_lock
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared import host_checks
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared.artifacts import redact_secrets

# Options of the playbook's own watch that a supervised unit cannot honour: its supervisor
# decides every start and systemd restarts it. Each names the sglang_service role variable
# that sets the same thing for the supervised unit.
SUPERVISOR_DECIDES = {
    "detector": "sglang_service_supervisor_detector",
    "max_attempts": "sglang_service_start_limit_burst",
    "backoff_base_s": "sglang_service_restart_sec",
    "backoff_max_s": "sglang_service_restart_sec",
    "stop_timeout_s": "sglang_service_timeout_stop_s",
    "failed_stop_timeout_s": "sglang_service_timeout_stop_s",
    "release_timeout_s": None,
    "gpu_idle_mib": None,
}


def supervised_option_problem(options):
    """Words refusing the options a supervised unit would silently ignore, or None."""
    ignored = options.changed_from_default(SUPERVISOR_DECIDES)
    if not ignored:
        return None
    return ("option(s) %s would have no effect: the unit runs under its supervisor, which decides every start "
            "(systemd restarts it). Set the supervisor's own instead (%s), or leave them unset for this unit" % (
                ", ".join(ignored),
                "; ".join("%s: %s" % (n, SUPERVISOR_DECIDES[n] or "not applicable") for n in ignored)))


class Preflight:
    """Reads the host for a RestartRun and says whether a restart must refuse it. weights:
    the run's WarmColdPlan (the first read decides whether the host runs the weight cache)."""

    def __init__(self, run, weights):
        self.run = run
        self.weights = weights

    def read(self):
        """(unit state, classified GPU holders) in one read; the venv noted for what follows."""
        run = self.run
        result = run.read("reading the unit's state and GPU holders", "unit_state", unit_state=True,
                          holders=True, gpu_timeout_s=host_checks.NVIDIA_SMI_TIMEOUT_S)
        state = result["unit_state"]
        run.use_venv(state)
        if state["installed"]:
            self.weights.read_daemon(first=True)
        return state, run.classified(result["gpu_holders"])

    def note(self, check):
        """The GPU holders the preflight found, into run.json's preflight."""
        self.run.record["preflight"].update({
            "nvidia_smi": check.available, "nvidia_smi_error": check.error, "gpus": len(check.gpus),
            "gpu_holders": [{"pid": h.pid, "kind": h.kind, "mem_mib": h.mem_mib,
                             "cmdline": redact_secrets(h.cmdline)} for h in check.holders],
        })

    def refusal(self, state, check):
        """What makes a restart refuse the host before anything changes, as (reason_code,
        reason, because), or None: the decisions of a real run and of check mode."""
        run = self.run
        supervised = systemd_unit.is_supervised(state["exec_start"])
        if state.get("held"):
            return ("unit_held", self._held_words(state), "on-call holds the unit: nothing was stopped or started")
        foreign = check.of_kind("foreign")
        if foreign:
            return ("gpu_busy_foreign", "GPUs held by processes outside %s: %s" % (
                run.unit, "; ".join(h.describe() for h in foreign)), None)
        if run.server is None and supervised:
            refused = supervised_option_problem(run.options)
            if refused:
                return ("option_not_applicable", refused,
                        "nothing was changed: an option that would silently do nothing is refused")
        orphans = check.of_kind("orphan")
        if orphans and not run.args["kill_orphans"]:
            return ("orphan_processes", "leftover server processes outside %s hold GPU memory: %s "
                    "(set kill_orphans: true to kill them)" % (run.unit, "; ".join(h.describe() for h in orphans)),
                    None)
        if run.server is not None and supervised:
            return ("server_node_supervised", "%s runs under the unit supervisor, which decides for one host only; "
                    "the nodes of a server over several hosts run without it (sglang_service_supervisor: false)"
                    % run.unit, None)
        return None

    def _held_words(self, state):
        return ("%s is held by on-call (%s): systemd starts it for nobody; release the hold with "
                "`rm %s && systemctl daemon-reload` (docs/runbook.md#stop-the-automation)" % (
                    self.run.unit, state["held"], state["held"]))

    def lock_holder(self):
        """Who holds the host's restart lock (words), or None; reads only."""
        run = self.run
        if run.lock is None:
            return None
        dummy_rc, out, dummy_err = run.sh(host_lock.peek_cmd(run.lock.lock_dir), "lock check")
        state, now, holder = host_lock.parse_answer(out)
        if state != "HELD":
            return None
        stale = host_lock.stale_because(holder or {}, now, run.lock.controller, run.lock.alive)
        if stale:   # a restart would take it over: said, and no reason to refuse
            run.access.emit("restart lock: %s; stale (%s): a restart would take it over" % (
                host_lock.describe(holder, now), stale))
            return None
        return host_lock.describe(holder or {}, now)
