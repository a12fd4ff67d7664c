"""An engine's start beside SGLang's weight cache daemon, as its supervisor runs it: before
the launch, wait for every GPU's daemon (weight_cache_watch.DaemonWait), read a later SGLang's
delivery budget and decide warm or cold with the restart playbook's decision
(domain/warm_cold.decide, the same inputs), stopping a daemon loaded before the previous
start ended so that its unit loads the weights again; during the start, read from the
engine's lines whether it attached or fell back to disk; after a ready one, the budget left
into the metrics folder as the playbook writes it. The start's kind
(domain/weight_cache.StartKind) goes to the start record, the metrics and the progress line."""
import os
import signal

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import warm_cold, weight_cache
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.durations import fmt_duration
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.progress_line import SEP
from ansible_collections.sglang_ops.serving.plugins.module_utils.host import cgroup, weight_cache_budget
from ansible_collections.sglang_ops.serving.plugins.module_utils.records import start_metrics
from ansible_collections.sglang_ops.serving.plugins.module_utils.services import weight_cache_watch


def unusable_reason(health):
    """daemon_not_healthy with the words, when the daemon's supervisor says ready but a GPU's
    daemon cannot be attached to here in a way its reload cures (a ready file refused or
    naming another process, a socket that is not the daemon's or not listening): the start
    is cold, never a warm one that fails on it. None otherwise."""
    if health is None or health.healthy or not health.reload_cures():
        return None
    return "%s: %s" % (weight_cache.REASON_DAEMON_NOT_HEALTHY, health.reason)


class EngineCacheStart:
    """One engine start attaching to the weight cache daemon (cache_watch: the unit's
    weight_cache_watch.WeightCacheWatch). start_kind is None until wait() returns;
    cold_reason says why this start is cold, or None. sleep raises when a stop is
    requested; mono and wall are the supervisor's monotonic and epoch clocks."""

    def __init__(self, settings, cache_watch, record, outlook, notify, say, sleep, mono, wall,
                 shell=weight_cache_budget.local_shell):
        self.s, self.cache_watch, self.record, self.outlook = settings, cache_watch, record, outlook
        self.notify, self.say, self.sleep, self.mono, self.wall = notify, say, sleep, mono, wall
        self.shell = shell      # read_budget's shell(cmd, timeout_s) -> (rc, out, err)
        self.start_kind = None
        self.cold_reason = None
        self.budget_supported = None    # False once the daemon's SGLang said it has no budget

    def wait(self):
        """The engine starts once every GPU's daemon is ready: started while the daemon
        still loads, it would load from disk itself. The wait lasts while the daemon shows a
        load in progress (DaemonWait), never past the start timeout. Once the daemon is
        ready, cold as the playbook decides: a daemon loaded before the previous start ended
        is stopped and its reload waited for. Sets, records and returns the StartKind."""
        previous = weight_cache_watch.previous_start(self.s.starts_dir, self.record.name)
        decision, health = self._await_daemon(None)
        if decision == "go":
            unusable = unusable_reason(health)
            planned = warm_cold.decide(previous, unusable is None, budget=self._read_budget("before", previous),
                                       min_deliveries=self.s.weight_cache_min_deliveries)
            if planned.cold and planned.reason == weight_cache.REASON_DAEMON_NOT_HEALTHY:
                self.cold_reason = unusable
            else:
                self.cold_reason = planned.reason if planned.cold else None
            since = self._reload_daemon(previous, health) if self.cold_reason else None
            if since is not None:
                decision, health = self._await_daemon(since)
            elif not self.cold_reason and weight_cache_watch.loaded_since(self.cache_watch.ready_mtimes(), previous):
                # the daemon was restarted since the previous start (a cold restart run, an
                # upgrade, systemd after the daemon died): its weights come from disk for this one
                self.cold_reason = weight_cache_watch.REASON_DAEMON_RELOADED
        kind = weight_cache.StartKind(decision == "go")
        if kind.warm and self.cold_reason:
            kind.kind, kind.reason = weight_cache.RESTART_COLD, self.cold_reason
        self.start_kind = kind
        self.record_kind()
        if self.outlook is not None:
            self.outlook.attached_weight_cache(kind.warm)
        return kind

    def _read_budget(self, when, previous=None):
        """The daemon's DeliveryBudget (None: none known), read as the playbook reads it and kept
        in the start record as delivery_budget_before or _after. Not asked while the daemon
        that said it has none (SGLang 0.5.23) is the one the previous start recorded."""
        said = (previous or {}).get("delivery_budget_before") or {}
        reloaded = weight_cache_watch.loaded_since(self.cache_watch.ready_mtimes(), previous)
        if said.get("supported") is False and not reloaded:
            self.budget_supported = False
        if self.budget_supported is False:
            self.record.update(**{"delivery_budget_" + when: {"supported": False}})
            return None
        pids = [p["pid"] for p in cgroup.unit_processes(weight_cache.daemon_unit(self.s.unit))]
        reading = weight_cache_budget.read_budget(self.shell, pids)
        self.budget_supported = reading.supported
        self.record.update(**{"delivery_budget_" + when: reading.to_dict()})
        if reading.problem:
            self.say("weight cache delivery budget not read: %s" % reading.problem)
        elif reading.budget is not None:
            self.say("weight cache delivery budget: %s" % reading.budget.words())
        return reading.budget

    def after_ready(self):
        """After a ready start (READY=1 sent): the budget left, said and written as
        sglang_weight_cache_deliveries_remaining into the metrics folder, as the playbook does
        after a ready restart."""
        if self.budget_supported is False or self.start_kind is None:
            return
        budget = self._read_budget("after")
        if budget is None or not self.s.metrics_dir:
            return
        text = start_metrics.render_delivery_budget(self.s.unit, budget, host=self.s.host, clock=self.wall)
        try:
            start_metrics.write_textfile(self.s.metrics_dir, start_metrics.budget_file_name(self.s.unit), text)
        except OSError as e:
            self.say("warning: the delivery budget metric not written: %s" % e)

    def _await_daemon(self, since):
        """Wait for the daemon as DaemonWait decides (since: only a daemon loaded after that
        epoch time counts); ("go" or "give_up", the last DaemonHealth)."""
        wait = weight_cache_watch.DaemonWait(weight_cache_watch.daemon_starts_dir(self.s.starts_dir),
                                             self.s.start_timeout_s or weight_cache_watch.DEFAULT_WAIT_S,
                                             grace_s=weight_cache_watch.DAEMON_GRACE_S, since=since)
        began = self.mono()
        health = self.cache_watch.check()
        decision, words = wait.judge(health, 0.0, self._files_fresh(since), bool(self.cache_watch.dead))
        if decision != "go":
            self.say("waiting for the weight cache daemon: %s" % words)
        while decision == "wait":
            waited_s = self.mono() - began
            line = "waiting for the weight cache daemon%s%s%s%s" % (SEP, fmt_duration(waited_s), SEP, words)
            self.notify.status(line[:400])
            self.notify.extend_timeout(self.s.extend_timeout_s)
            self.record.update(progress=line, reason=words)
            self.sleep(self.s.poll_s)
            health = self.cache_watch.check()
            decision, words = wait.judge(health, self.mono() - began, self._files_fresh(since), bool(self.cache_watch.dead))
        waited_s = self.mono() - began
        if decision != "go":
            self.say("the engine starts without the weight cache daemon after %s and loads from disk: %s" % (
                fmt_duration(waited_s), words))
        elif waited_s >= 1 or not health.healthy:
            self.say("%s after %s" % (words, fmt_duration(waited_s)))
        return decision, health

    def _files_fresh(self, since):
        return since is not None and weight_cache_watch.loaded_since(self.cache_watch.ready_mtimes(), {"ended_at": since})

    def _reload_daemon(self, previous, health):
        """A cold start: the daemon's processes (those of its unit named by the ready files)
        get SIGTERM unless it was loaded after the previous start ended and nothing of it is
        unusable (weight_cache_state.RELOAD_CURES). The epoch time from
        which a daemon start counts as the reload, or None when none is needed or possible."""
        why = "the previous start %s ended %s (%s)" % (
            os.path.basename(previous.get("dir") or ""), previous.get("verdict"), previous.get("reason_code")) \
            if previous else "no previous start"
        if previous and not health.reload_cures() and \
                weight_cache_watch.loaded_since(self.cache_watch.ready_mtimes(), previous):
            self.say("cold start (%s): %s; the weight cache daemon was loaded since" % (self.cold_reason, why))
            return None
        pids = weight_cache_watch.daemon_pids_to_stop(health, self.s.unit)
        if not pids:
            self.say("cold start (%s): %s; no daemon process of %s to stop, the engine attaches to what is there" % (
                self.cold_reason, why, weight_cache.daemon_unit(self.s.unit)))
            return None
        since = self.wall()
        self.say("cold start (%s): %s; stopping the weight cache daemon's processes %s so that %s loads the weights "
                 "again" % (self.cold_reason, why, " ".join(map(str, pids)), weight_cache.daemon_unit(self.s.unit)))
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError as e:
                self.say("warning: cannot signal daemon pid %d: %s" % (pid, e.strerror))
        return since

    def on_poll(self, obs):
        """The engine's lines since the last poll say whether it attached to the weight
        cache or fell back to disk."""
        if self.start_kind is None:
            return
        changed = False
        for rec in obs.get("log") or ():
            changed = self.start_kind.on_line(rec.get("msg") or "") or changed
        if self.cold_reason and self.start_kind.kind == weight_cache.RESTART_WARM:
            # attached to the daemon reloaded for this start: a cold start
            self.start_kind.kind, self.start_kind.reason = weight_cache.RESTART_COLD, self.cold_reason
        if changed:
            self.record_kind()
            self.say("%s start: %s" % (self.start_kind.kind, "attached to the weight cache" + (
                " (its daemon reloaded: %s)" % self.start_kind.reason if self.cold_reason else "")
                if self.start_kind.attached else "the weights load from disk (%s)" % self.start_kind.reason))

    def on_ready(self):
        """Launched warm, but the engine never said it attached: not a warm start."""
        if self.start_kind.warm and not self.start_kind.attached:
            self.start_kind.kind, self.start_kind.reason = weight_cache.RESTART_COLD, weight_cache.REASON_NOT_ATTACHED
            self.record_kind()

    def record_kind(self):
        """The start's kind into its record and the metrics."""
        self.record.update(**self.start_kind.to_record())
        if self.outlook is not None:
            self.outlook.restart_kind(self.start_kind.kind, self.start_kind.reason)
