"""Check mode of the restart: one observation of the host and the detector's reading of it,
and what a restart would do, decided by the same preflight a real run makes. Nothing on
the host changes.
"""
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.progress_line import progress_line
from ansible_collections.sglang_ops.serving.plugins.module_utils.host import systemd_unit
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import relative_observation
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import supervised_restart
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.restart_run import RemoteStepFailed


class CheckModeObservation:
    """Observes a RestartRun's host once; preflight, weights (WarmColdPlan) and ending
    (RunEnding) are the run's own units."""

    def __init__(self, run, preflight, weights, ending):
        self.run = run
        self.preflight = preflight
        self.weights = weights
        self.ending = ending

    def observe_once(self, supervised_settings=None):
        """One observation and the detector's reading of it, and what a restart would do (the
        preflight decisions of a real run); changes nothing on the host. supervised_settings:
        the DetectorSettings of the unit's supervisor, used when the unit runs under it."""
        run = self.run
        state, check = self.preflight.read()
        if not state["installed"]:
            return self.ending.finish("check_mode", "preflight", "unit_missing",
                                      "unit %s is not installed on %s" % (run.unit, run.host), failed=True)
        self.preflight.note(check)
        t0 = run.access.clock()
        result = run.access.probe(since_epoch_s=None)
        if result.get("failed") or "observation" not in result:
            raise RemoteStepFailed("probe failed on %s: %s" % (run.host, result.get("msg", "no observation")))
        obs = relative_observation(result["observation"], t0)
        supervised = systemd_unit.is_supervised(state["exec_start"])
        # On a supervised unit its supervisor's settings decide every start: assess with those.
        settings = supervised_settings if supervised and supervised_settings is not None else run.options.settings
        a = run.options.new_detector(settings).observe(obs)
        run.access.emit(progress_line(a))
        would, refused = self._would(state, check, supervised)
        run.record["settings"] = settings.to_dict()
        if settings is not run.options.settings:
            run.record["settings_from"] = "the unit's supervisor (supervisor_detector)"
        res = self.ending.finish("check_mode", a.phase, a.reason_code, a.reason)
        res["settings"] = run.record["settings"]
        res.update({"changed": True, "would": would, "assessment": a.to_dict(),
                    "unit_state": obs.get("unit"), "missing": result.get("missing", {}),
                    "msg": "%s: %s; %s" % (run.host, a.reason, would)})
        res["verdict"] = a.verdict
        self._add_weight_cache(res, would, refused)
        if supervised:
            res["supervised"] = True
            res["recent_starts"] = self._recent_starts()
            res["recent_starts_summary"] = [supervised_restart.start_summary(r) for r in res["recent_starts"]]
        return res

    def _would(self, state, check, supervised):
        """(what a restart would do, whether it would refuse): the same preflight decisions a
        real run makes, in its order (the lock is taken first)."""
        run = self.run
        if supervised and run.server is None:
            would = ("would restart %s once and follow its supervisor, which decides every start (systemd "
                     "restarts it while a restart can help)" % run.unit)
        else:
            would = ("would stop %s, confirm its processes are gone and the GPUs released, start it and watch "
                     "every %.0f s (up to %d attempts)" % (run.unit, run.args["poll_s"], run.args["max_attempts"]))
        refusal = self.preflight.refusal(state, check)
        held_by = self.preflight.lock_holder()
        if refusal and refusal[0] == "unit_held":
            would = "would refuse: " + refusal[1]
        elif held_by:
            would = "would refuse: another restart holds the host: " + held_by
        elif refusal:
            would = "would refuse: " + refusal[1]
        return would, bool(held_by or refusal)

    def _add_weight_cache(self, res, would, refused):
        """The daemon and the next restart's plan, beside the weight cache."""
        if self.run.daemon is None:
            return
        planned = self.weights.plan()
        res["weight_cache"] = dict(self.run.daemon.to_dict(), next_restart=planned.kind,
                                   next_restart_reason=planned.reason)
        res["weight_cache_summary"] = "%s; the next restart would be %s" % (self.weights.daemon_words(), planned.words())
        if not refused:
            res["would"] = would + "; " + planned.words()

    def _recent_starts(self, limit=5):
        """The supervisor's last starts on the host (verdict.json of each), newest first."""
        return (self.run.access.read(starts=limit).get("starts") or {}).get("starts") or []
