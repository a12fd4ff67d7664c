"""Warm or cold: the one decision of an engine start beside the weight cache daemon. The
restart playbook makes it before each start it runs (plugin_utils/restart/weight_cache_step.plan)
and the unit's supervisor before every start systemd makes, a reboot or a crash restarted
with no playbook running (services/engine_cache_start.py); both give it the same inputs
and so get the same plan and reason codes (weight_cache.cold_reason's). Pure, no I/O.
"""
from dataclasses import dataclass

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import weight_cache

# A previous start that ended one of these ways did not fail: ready, or stopped by systemd
# (an operator's stop, an upgrade); any other end (failed, stalled, interrupted) did.
_NOT_FAILED = ("ready", "stopped")


@dataclass(frozen=True)
class RestartPlan:
    kind: str       # weight_cache.RESTART_WARM or RESTART_COLD
    reason: str     # weight_cache.REASON_DAEMON_HEALTHY for a warm one, else why it is cold

    @property
    def cold(self):
        return self.kind == weight_cache.RESTART_COLD

    def words(self):
        if self.cold:
            return "cold (%s): the weight cache daemon is restarted too, the weights come from disk" % self.reason
        return "warm: the engine alone, the weight cache daemon keeps the weights on the GPUs"


def decide(previous, daemon_healthy, budget=None, min_deliveries=0, cold_requested=False):
    """The RestartPlan of the next engine start.

    previous: the record of the engine's previous start (a run.json attempt or the
    supervisor's start record: verdict, reason_code, restart_kind, restart_kind_reason), None
    when none is known; daemon_healthy: every GPU's daemon is ready; budget: the daemon's
    DeliveryBudget read just before (None: none known), cold below min_deliveries left;
    cold_requested: a cold start was asked for, which makes the first start cold (later ones
    follow the rules: a cold start that stalled after its weights is followed by a warm one,
    the daemon keeping the weights it has just loaded)."""
    if cold_requested and not previous:
        return RestartPlan(weight_cache.RESTART_COLD, weight_cache.REASON_REQUESTED)
    previous = previous or {}
    failed = bool(previous) and previous.get("verdict") not in _NOT_FAILED
    kind = previous.get("restart_kind")
    if failed and budget is None and previous.get("restart_kind_reason") == weight_cache.REASON_BUDGET_EXHAUSTED:
        # the engine was answered budget_exhausted and the daemon's --status could not be read
        return RestartPlan(weight_cache.RESTART_COLD, weight_cache.REASON_BUDGET_EXHAUSTED)
    reason = weight_cache.cold_reason(
        previous.get("reason_code") if failed else None, daemon_healthy,
        failed and kind == weight_cache.RESTART_WARM, kind == weight_cache.RESTART_COLD_FALLBACK,
        budget=budget, min_deliveries=min_deliveries)
    if reason:
        return RestartPlan(weight_cache.RESTART_COLD, reason)
    return RestartPlan(weight_cache.RESTART_WARM, weight_cache.REASON_DAEMON_HEALTHY)
