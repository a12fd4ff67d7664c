"""The unit's supervisor: the ExecStart of a Type=notify unit, running the SGLang server
as its child in the same cgroup and watching every start with the restart action's
probe, detector and watch loop (docs/architecture.md, "Every start watched").

    python3 -I sglang-supervisor --settings FILE.json [--once] -- SERVER ARGV...

- The server's output passes through the log filter (module_utils/services/log_filter.py) into
  the journal, and each line is handed to the detector as it arrives.
- Every poll: one probe of the server's process tree, GPUs and HTTP, the detector, a
  line in the start's trace (module_utils/records/start_records.py), STATUS= with the progress
  line, EXTEND_TIMEOUT_USEC= while no final verdict is reached.
- READY=1 only after a one-token completion succeeded. Then a completion every
  liveness_interval_s: WATCHDOG=1 after each answer (or while /metrics shows the server's
  work moving: tokens prefilled or generated, requests leaving the queue or finishing;
  module_utils/services/work_counters.py); liveness_misses misses in a row with no work
  moving are a hang_after_ready.
- A stall or failure: diagnostics first, then the server is stopped and the supervisor
  exits with the failure class's status (failure_classes.py); systemd restarts the unit
  unless that status is in RestartPreventExitStatus=.
- SIGTERM (systemctl stop): the server is stopped, the start recorded as stopped, exit 0.
- Never the fault (docs/architecture.md): the settings are proven before the server is
  started (supervisor_settings.py, exit 64); any other exception kills the server and
  exits supervisor_fault (65); a record that cannot be written is a warning; the log is
  kept in bounded memory (log_pump.py); durations are on a monotonic clock (clock()).
- --once: one start watched by a plain process, no systemd around it (a GPU test machine,
  a shell): once the start is decided the server is stopped and the supervisor exits, 0
  when it came up ready, the failure class's status otherwise; no liveness checks after
  ready. Without $NOTIFY_SOCKET nothing is sent, with or without --once (sd_notify.py).
- Every progress line carries the ETA from the host's earlier starts (module_utils/
  start_outlook.py); with metrics_dir set, the start's metrics file (phase, ETA,
  restarts, hangs after ready) is rewritten there every poll for node_exporter.
"""
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import bounded_run, http_check, nvidia_smi, procfs, pyspy, systemd_unit
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import failure_classes, log_lines, sglang_dialect, weight_cache
from ansible_collections.sglang_ops.serving.plugins.module_utils.records import start_records
from ansible_collections.sglang_ops.serving.plugins.module_utils.services import (
    log_filter, log_pump, observe_only, sd_notify, weight_cache_watch, work_counters)
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector import Detector
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.durations import fmt_duration
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import from_overrides
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.failure_classes import class_of_exit_code, exit_code
from ansible_collections.sglang_ops.serving.plugins.module_utils.host.probe import ProbeRequest, probe
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.progress_line import SEP, progress_line
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.start_outlook import StartOutlook
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.start_watch import (
    TraceTarget, WatchOptions, completion_ok, watch_start)
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.supervisor_settings import SupervisorSettings
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.weight_cache_watch import (
    DEFAULT_WAIT_S, WeightCacheWatch, ready_words)

CONFIG_ERROR = "supervisor_config"
DAEMON_DIED = "weight_cache_daemon_died"
SUPERVISOR_FAULT = "supervisor_fault"
# Liveness answers that prove the server is up but refuse the key it was started with.
AUTH_REFUSED = (401, 403)
AUTH_MISMATCH = "auth_mismatch"
# A liveness completion unanswered while the server's work moves (work_counters.py).
BUSY = "busy"
# How long a server that exited while serving may take to hand over its last lines.
PUMP_DRAIN_S = 2.0


class _Stopped(Exception):
    """SIGTERM arrived: systemd is stopping the unit."""


class _Observed:
    """The detector, with the supervisor's per-poll work after each observation."""

    def __init__(self, detector, on_poll):
        self.detector, self.on_poll = detector, on_poll

    def observe(self, obs):
        a = self.detector.observe(obs)
        self.on_poll(obs, a)
        return a


class _LocalHostAccess:
    """The watch's start_watch.HostAccess on the host itself: the probe of the server's process
    tree, this process's clock and sleep (which a stop request interrupts)."""

    def __init__(self, sup):
        self.sup = sup

    def probe(self, cursor, stacks, since_epoch_s):
        del since_epoch_s   # the log comes from the pump, which has held it since the start
        return self.sup._probe(cursor, stacks)

    def clock(self):
        return self.sup.clock()

    def sleep(self, seconds):
        self.sup._sleep(seconds)

    def emit(self, line):
        del line   # the progress line goes out with each poll (STATUS=), see Supervisor._on_poll


class Supervisor:
    """One start of the server.

    Two clocks: `wall` (epoch seconds) only for the times shown to people (started_at,
    ended_at, the folder's stamp); every duration (the watch's elapsed time and timeouts,
    each observation's and log record's `t`, ready after, phase durations, time to ready in
    the metrics and the history the ETA learns from) comes from `mono`, which never
    steps. clock() is the start's timeline: the wall time at the start plus the monotonic
    time since, so it reads as epoch seconds and never jumps with the wall clock.
    """

    def __init__(self, settings, argv, notifier=None, wall=time.time, mono=time.monotonic, out_fd=1, once=False):
        self.s = settings
        self.once = once         # --once: exit when the start is decided, the server stopped
        self.argv = list(argv)
        self.notify = notifier or sd_notify.Notifier()
        self.wall, self.mono = wall, mono
        self.wall0, self.mono0 = wall(), mono()
        self.out_fd = out_fd
        self.stop_requested = threading.Event()
        self.child = None
        self.pump = None
        self.record = None
        self.api_key = None      # the key the server was started with, read once before it is
        self.phase_entries = []
        self.t0 = None
        self.last_line = ""
        self.last_obs = {}
        self.cpu0 = _cpu_s()
        self.cpu_last = None
        self.cpu_max_poll = 0.0
        self.outlook = None      # StartOutlook: the ETA, and the metrics file when metrics_dir is set
        self.attempt = 1         # systemd's restarts of the unit so far, plus one
        self.observe_only = None  # a verdict_memory.ObserveOnly when rule 4 holds this start unkilled
        # the weight cache daemon this unit is (serves weight_cache) or attaches to; None: none
        self.cache_watch = WeightCacheWatch(settings.weight_cache_ready_template, settings.nvidia_smi) \
            if settings.weight_cache_ready_template else None
        self.start_kind = None   # weight_cache.StartKind of an engine attaching to the daemon
        self.cold_reason = None  # why this engine start is cold (weight_cache_watch.cold_decision), or None

    @property
    def serves_cache(self):
        """This unit runs the weight cache daemon (ready by its ready files, no HTTP)."""
        return self.s.serves == weight_cache.SERVES_WEIGHT_CACHE

    def clock(self):
        """The start's timeline in epoch seconds (see the class): monotonic underneath."""
        return self.wall0 + (self.mono() - self.mono0)

    # ------------------------------------------------------------------ output
    def say(self, text):
        """One journal line; a journal that cannot be written is no reason to stop."""
        try:
            log_filter.write_all(self.out_fd, ("sglang-supervisor: %s\n" % text).encode("utf-8", "replace"))
        except OSError:
            pass

    def _sleep(self, seconds):
        if self.stop_requested.wait(seconds):
            raise _Stopped()

    # ------------------------------------------------------------------ child
    def _spawn(self, blank):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTIFY_SOCKET", "WATCHDOG_"))}
        read_fd, write_fd = os.pipe()
        try:
            self.child = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=write_fd, stderr=write_fd,
                                          env=env, process_group=0)
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        self.pump = log_pump.LogPump(read_fd, blank, self.out_fd, clock=self.clock, warn=self.say)
        self.pump.start()

    def _stop_child(self):
        """SIGTERM to the server's process group, SIGKILL after stop_timeout_s; safe to call
        on every exit path, twice included."""
        child = self.child
        if child is None or child.poll() is not None:
            return
        try:
            os.killpg(child.pid, signal.SIGTERM)
        except OSError:
            pass
        try:
            child.wait(self.s.stop_timeout_s)
        except subprocess.TimeoutExpired:
            self.kill_child()

    def kill_child(self):
        """SIGKILL to the server's process group, and reap it (the last resort's stop)."""
        child = self.child
        if child is None:
            return
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            child.wait(30)
        except (subprocess.TimeoutExpired, OSError):
            pass

    def _unit_view(self):
        """The server process as the detector reads a unit: running, or gone with its status."""
        status = self.child.poll()
        if status is None:
            return {"active": "active", "sub": "running", "main_pid": self.child.pid}
        return {"active": "inactive", "sub": "exited", "main_pid": 0, "exec_main_status": status}

    # ------------------------------------------------------------------ probe
    def _probe(self, cursor, want_stacks, completion="auto"):
        del cursor   # the log comes from the pump, not from a journal cursor
        req = ProbeRequest(pid=self.child.pid, base_url=None if self.serves_cache else self.s.base_url, model=self.s.model,
                           completion=completion, api_key=self.api_key,
                           stacks=bool(want_stacks and self.s.stacks), venv_bin=self.s.venv_bin,
                           nvidia_smi=self.s.nvidia_smi)
        result = probe(req)
        obs = result["observation"]
        obs["ts"] = round(self.clock(), 3)   # the start's timeline, not the probe's wall clock
        missing = result["missing"]
        for key in ("unit", "log", "process") + (("http",) if self.serves_cache else ()):
            missing.pop(key, None)
        if self.serves_cache:
            obs["weight_cache"] = self.cache_watch.observation(self.cache_watch.check(launcher_pid=self.child.pid))
        obs["unit"] = self._unit_view()
        obs["log"], dropped = self.pump.drain()
        if dropped:
            missing["log_truncated"] = "%d lines dropped since the last poll (more than %d lines or %d KiB); " \
                "the journal has them all" % (dropped, log_pump.PENDING_RECORDS, log_pump.PENDING_BYTES // 2**10)
            self.say("%d lines of the server's output were not kept for the detector since the last poll "
                     "(a flood; the journal has them all)" % dropped)
        return result

    # ------------------------------------------------------------------ each poll
    def _on_poll(self, obs, a):
        self.last_obs = obs
        if not self.phase_entries or self.phase_entries[-1][0] != a.phase:
            self.phase_entries.append((a.phase, obs["t"]))
            self.say("phase %s at %s" % (a.phase, fmt_duration(obs["t"])))
        # The outlook runs here rather than in the watch, so the ETA is in STATUS= and the record.
        self._read_start_kind(obs)
        estimate = self.outlook.on_poll(obs, a) if self.outlook is not None else None
        line = progress_line(a, estimate)
        if self.start_kind is not None:
            line += SEP + self.start_kind.words()
        if self.observe_only is not None:
            line += SEP + observe_only.words(self.observe_only)
        self.last_line = line
        self.notify.status(line)
        if not a.final:
            self.notify.extend_timeout(self.s.extend_timeout_s)
        self.record.update(phase=a.phase, reason_code=a.reason_code, reason=a.reason, progress=line,
                           eta=estimate.to_dict() if estimate is not None else None,
                           polls=self.record.record["polls"] + 1,
                           phase_durations=start_records.time_in_phases(self.phase_entries, obs["t"]),
                           supervisor=self._own_cost())

    def _read_start_kind(self, obs):
        """The engine's lines say whether it attached to the weight cache or fell back to disk."""
        if self.start_kind is None:
            return
        changed = False
        for rec in obs.get("log") or ():
            changed = self.start_kind.on_line(rec.get("msg") or "") or changed
        if self.cold_reason and self.start_kind.kind == weight_cache.RESTART_WARM:
            # attached to the daemon reloaded for this start: a cold start
            self.start_kind.kind, self.start_kind.reason = weight_cache.RESTART_COLD, self.cold_reason
        if changed:
            self._record_start_kind()
            self.say("%s start: %s" % (self.start_kind.kind, "attached to the weight cache" + (
                " (its daemon reloaded: %s)" % self.start_kind.reason if self.cold_reason else "")
                if self.start_kind.attached else "the weights load from disk (%s)" % self.start_kind.reason))

    def _record_start_kind(self):
        self.record.update(**self.start_kind.to_record())
        if self.outlook is not None:
            self.outlook.restart_kind(self.start_kind.kind, self.start_kind.reason)

    def _wait_for_daemon(self):
        """An engine attaching to the weight cache starts once every GPU's daemon is ready:
        started while the daemon still loads, it would load from disk itself. The wait lasts
        while the daemon shows a load in progress (DaemonWait), never past the start timeout.
        Once the daemon is ready, cold as the playbook decides (weight_cache_watch.cold_decision):
        a daemon loaded before the previous start ended is stopped and its reload waited for.
        The StartKind it starts with."""
        previous = weight_cache_watch.previous_start(self.s.starts_dir, self.record.name)
        decision, health = self._await_daemon(None)
        if decision == "go":
            self.cold_reason = weight_cache_watch.cold_decision(previous)
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
        return kind

    def _await_daemon(self, since):
        """Wait for the daemon as DaemonWait decides (since: only a daemon loaded after that
        epoch time counts); ("go" or "give_up", the last DaemonHealth)."""
        wait = weight_cache_watch.DaemonWait(weight_cache_watch.daemon_starts_dir(self.s.starts_dir),
                                             self.s.start_timeout_s or DEFAULT_WAIT_S,
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
            self._sleep(self.s.poll_s)
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
        get SIGTERM unless it was loaded after the previous start ended. The epoch time from
        which a daemon start counts as the reload, or None when none is needed or possible."""
        why = "the previous start %s ended %s (%s)" % (
            os.path.basename(previous.get("dir") or ""), previous.get("verdict"), previous.get("reason_code"))
        if weight_cache_watch.loaded_since(self.cache_watch.ready_mtimes(), previous):
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

    def _serve_cache(self):
        """After ready, the daemon's liveness: the launcher still runs and every GPU's ready
        file names a live daemon; (code, reason) when that ends. A ready file that names no
        pid while its daemon's socket listens is a warning (weight_cache_watch)."""
        warned = ()
        while True:
            self._sleep(self.s.liveness_interval_s)
            if self.child.poll() is not None:
                return DAEMON_DIED, "the weight cache daemon exited with status %s after ready" % self.child.returncode
            health = self.cache_watch.check(launcher_pid=self.child.pid)
            if not health.healthy:
                return DAEMON_DIED, "after ready: %s" % health.reason
            warnings = self.cache_watch.warnings
            if warnings and warnings != warned:
                self.say("warning: %s; the daemon serves, it is left running" % "; ".join(warnings))
            elif warned and not warnings:
                self.say("every ready file names its daemon again")
            warned = warnings
            status = "ready%s%s" % (SEP, ready_words(health, len(self.cache_watch.uuids)))
            if warnings:
                status += "%swarning: %d ready file(s) name no pid" % (SEP, len(warnings))
            self.notify.send(WATCHDOG=1, STATUS=status)

    def _own_cost(self):
        """The supervisor's own CPU (with the probe's commands: nvidia-smi, py-spy) from one
        poll to the next, and its peak memory; read while the server runs (its CPU would
        count once it is reaped)."""
        now = _cpu_s()
        poll_cpu = now - (self.cpu_last if self.cpu_last is not None else self.cpu0)
        self.cpu_last = now
        self.cpu_max_poll = max(self.cpu_max_poll, poll_cpu)
        polls = max(1, self.record.record["polls"])
        return {"cpu_s": round(now - self.cpu0, 3), "cpu_s_per_poll": round((now - self.cpu0) / polls, 4),
                "cpu_s_last_poll": round(poll_cpu, 4), "cpu_s_max_poll": round(self.cpu_max_poll, 4),
                "max_rss_mib": round(_peak_rss_kib() / 1024.0, 1)}

    # ------------------------------------------------------------------ the start
    def _watch_start(self):
        """The collection's watch (start_watch.watch_start) with this process as its host access."""
        held = "" if self.observe_only is None else "; " + observe_only.words(self.observe_only)
        options = WatchOptions(
            poll_s=self.s.poll_s, start_timeout_s=self.s.start_timeout_s or float("inf"),
            settings=from_overrides(self.s.detector),
            trace=TraceTarget(self.record.trace_path, "start-" + self.record.name, self.s.unit,
                              "start of %s watched by its supervisor%s" % (self.s.unit, held),
                              open_writer=self._open_trace),
            outlook=None, recorded_outlook=self.outlook,   # the outlook runs in _on_poll; the trace records it
            observe_only=self.observe_only)
        return watch_start(_LocalHostAccess(self), options, self.t0,
                           new_detector=lambda settings, **kw: _Observed(Detector(settings, **kw), self._on_poll))

    def _open_trace(self, path, header):
        """The start's trace; its header says what the unit serves and, for an engine attaching
        to the weight cache, the start's kind as launched (warm: the daemon was ready)."""
        if self.cache_watch is not None:
            header = dict(header, weight_cache={"serves": self.s.serves, **(
                self.start_kind.to_record() if self.start_kind is not None else {})})
        return self.record.open_trace(path, header)

    def _observe_only_or_not(self):
        """Rule 4: the same verdict ended the unit's last starts, so this one runs unkilled up
        to a ceiling; said in the journal, STATUS=, the start record and the metrics."""
        try:
            self.observe_only = observe_only.on_host(
                self.s.starts_dir, self.outlook.estimator.usual_total_s, self.s.observe_only_min_ceiling_s,
                self.s.observe_only_ceiling_factor, exclude=self.record.path)
        except (OSError, ValueError, TypeError, KeyError) as e:
            # unreadable earlier starts cost rule 4's memory for this start, never the start
            self.say("warning: the unit's earlier starts cannot be read for rule 4 (%s); this start is watched as usual" % e)
            self.observe_only = None
        if self.observe_only is None:
            return
        words = observe_only.words(self.observe_only)
        self.say(words)
        self.notify.status(words)
        self.record.update(observe_only=observe_only.to_dict(self.observe_only))
        self.outlook.metrics.observe_only(True)

    def _serve(self):
        """After READY: a completion every liveness_interval_s; returns the reason the
        server is no longer serving (process_exited or hang_after_ready) with its words.
        A completion refused for its key (401/403) is an answer, not a miss: the server is
        up but holds another key than the one it was started with (auth_mismatch). An
        unanswered completion while /metrics shows work moving (work_counters.py) is a busy
        server, not a miss."""
        misses, work, state = 0, work_counters.read(self.s.base_url), "serving"
        while True:
            self._sleep(self.s.liveness_interval_s)
            if self.child.poll() is not None:
                return self._exit_after_ready()
            answer = http_check.post_completion(self.s.base_url, self.s.model, self.api_key, self.s.liveness_timeout_s)
            now_work = work_counters.read(self.s.base_url)
            moved = work_counters.moved(work, now_work)
            work = now_work if now_work is not None else work
            check = liveness_state(answer, bool(moved))
            if check == AUTH_MISMATCH:
                misses = 0
                words = "completion refused with %s: the server does not take the API key it was started with " \
                        "(%s changed?); restart the unit to apply a new key" % (answer["status"], self.s.api_key_file)
                if state != AUTH_MISMATCH:
                    self.say("warning: %s: %s" % (AUTH_MISMATCH, words))
                state = AUTH_MISMATCH
                self.notify.send(WATCHDOG=1, STATUS="ready%sserving%s%s: %s" % (SEP, SEP, AUTH_MISMATCH, words))
                continue
            if check == "serving":
                misses = 0
                if answer["ok"]:
                    if state != "serving":
                        self.say("the liveness completion is %s again" % ("accepted" if state == AUTH_MISMATCH else "answered"))
                    state, last = "serving", "completion in %.0f ms" % answer["ms"]
                else:
                    last = "busy: completion %s, %s" % (_unanswered(answer), ", ".join(moved))
                    if state != BUSY:
                        self.say("the liveness completion went unanswered but the server is working (%s): "
                                 "busy, not a miss" % ", ".join(moved))
                    state = BUSY
                self.notify.send(WATCHDOG=1, STATUS="ready%sserving%slast check %s" % (SEP, SEP, last))
                continue
            misses, state = misses + 1, "miss"
            words = "completion %s" % _unanswered(answer)
            self.say("liveness check missed %d/%d: %s" % (misses, self.s.liveness_misses, words))
            self.notify.status("ready%sliveness check missed %d/%d (%s)" % (SEP, misses, self.s.liveness_misses, words))
            if misses >= self.s.liveness_misses:
                return "hang_after_ready", "%d one-token completions in a row went unanswered (the last: %s) " \
                    "and %s" % (misses, words, "/metrics showed no work meanwhile (no prompt or generated tokens, "
                                "no running or queued request leaving)" if now_work is not None else
                                "no work could be read meanwhile (/metrics does not answer)")

    def _exit_after_ready(self):
        """(failure class, words) of a server that exited while serving: the most specific
        lethal line among its last ones names the class (the engine's line when its weight
        cache daemon died, not the launcher's generic reaction after it); without one,
        process_exited."""
        self.pump.join(PUMP_DRAIN_S)   # the server's last lines, written before it went
        words = "the server exited with status %s after ready" % self.child.returncode
        lethal = [line for line in map(log_lines.classify, self.pump.tail_lines())
                  if line.lethal and line.fatal_code in failure_classes.FAILURE_CLASSES]
        if not lethal:
            return "process_exited", words
        named = min(reversed(lethal), key=lambda line: log_lines.fatal_priority(line.fatal_code))
        return named.fatal_code, "%s: %s" % (words, named.text[:300])

    def _diagnose(self, assessment=None):
        """What on-call needs from a start that is about to be stopped."""
        rec = self.record
        rec.write_diagnostic("log-tail", self.pump.tail_text() if self.pump else "")
        pids = procfs.descendants(self.child.pid) if self.child else []
        rec.write_diagnostic("processes", "".join(
            "%d %s\n" % (pid, procfs.read_cmdline(pid) or "?") for pid in pids))
        targets = [(pid, sglang_dialect.rank_of(procfs.read_cmdline(pid) or "")) for pid in pids]
        targets = [(pid, rank) for pid, rank in targets if rank] or [(pid, None) for pid in pids[:1]]
        samples, why = pyspy.dump_stacks(targets, self.s.venv_bin, 10.0) if targets else (None, "no process")
        rec.write_diagnostic("py-spy", json.dumps(samples, indent=1) if samples is not None else "py-spy: %s\n" % why)
        exe = bounded_run.find_executable(self.s.nvidia_smi, nvidia_smi.EXTRA_DIRS)
        res = bounded_run.bounded_run([exe], 10.0) if exe else None
        rec.write_diagnostic("nvidia-smi", res.stdout if res is not None and res.ok else "nvidia-smi: %s\n" % (
            "not found" if res is None else "timed out" if res.timed_out else (res.stderr.strip() or "failed")))
        rec.write_diagnostic("assessment", json.dumps({"assessment": assessment, "last_observation": self.last_obs},
                                                      indent=1, default=str))

    def _elapsed(self):
        return self.clock() - self.t0

    def _finish(self, verdict, phase, reason_code, reason, status):
        end_t = round(self._elapsed(), 1)
        self.record.update(verdict=verdict, phase=phase, reason_code=reason_code, reason=reason, exit_code=status,
                           ended_at=round(self.wall(), 3),
                           # after ready the durations stay those of the start
                           phase_durations=self.record.record["phase_durations"]
                           if self.record.record["ready_after_s"] is not None
                           else start_records.time_in_phases(self.phase_entries, end_t))
        return status

    def _fail(self, verdict, phase, code, reason, assessment=None):
        if self.stop_requested.is_set():
            raise _Stopped()   # systemd's SIGTERM reached the server too: a stop, not a failure
        status = exit_code(code)
        line = "%s in %s: %s (%s, exit %d)" % (verdict, phase, code, reason, status)
        self.say(line + "; diagnostics in %s/diagnostics" % self.record.path)
        self.notify.stopping(line[:400])
        try:
            self._diagnose(assessment)
        finally:
            self._stop_child()
        self._count_failure(code, status)
        # which rule decided: rule 4's memory skips starts a dead process ended (verdict_memory)
        self.record.update(rule=((assessment or {}).get("evidence") or {}).get("rule"))
        return self._finish(verdict, phase, code, reason, status)

    def fault(self, exc):
        """The last resort (main): an exception nothing else caught. The server is killed,
        the start recorded as failed with supervisor_fault; the exit status."""
        status = exit_code(SUPERVISOR_FAULT)
        where = _where(exc)
        line = "%s: %s: %s%s" % (SUPERVISOR_FAULT, type(exc).__name__, exc, " (at %s)" % where if where else "")
        self.say("%s; the server is stopped (exit %d)" % (line, status))
        self.notify.stopping(line[:400])
        self.kill_child()
        if self.record is not None:
            try:
                self._count_failure(SUPERVISOR_FAULT, status)
                self._finish("failed", self.record.record["phase"], SUPERVISOR_FAULT, line, status)
            except Exception:  # the record is for people; the exit status is what counts now
                pass
        return status

    def _count_failure(self, code, status):
        """The metrics of a start that ends in a failure: a restart systemd is about to make,
        or the end of the unit's tries when a restart cannot help."""
        if self.outlook is None:
            return
        if code == "hang_after_ready":
            self.outlook.hang_after_ready()
        cls = class_of_exit_code(status)
        if cls is not None and not cls.restart_helps:
            self.outlook.finish("gave_up", code, self.attempt)
        else:
            self.outlook.restarted(code)

    def _read_key(self):
        """The API key the server is about to be started with; (key, why) with why set when
        the file cannot be read (the supervisor then fails closed)."""
        if not self.s.api_key_file:
            return None, None
        try:
            return log_filter.read_key(self.s.api_key_file), None
        except (OSError, ValueError) as e:
            return None, "cannot read the API key from %s (%s)" % (self.s.api_key_file, getattr(e, "strerror", None) or e)

    def _open_outlook(self):
        try:
            return StartOutlook.on_host(self.s.unit, self.s.metrics_dir, self.s.starts_dir, warn=self.say,
                                        host=self.s.host)
        except (OSError, ValueError) as e:   # an unreadable history or metrics file costs the ETA, not the start
            self.say("warning: the start history or metrics file cannot be read (%s); no ETA this start" % e)
            return StartOutlook(self.s.unit, warn=self.say, host=self.s.host)

    def run(self):
        """The start, from spawning the server to its end; the exit status. The server is
        stopped on every way out of here (a stop, a failure, an exception)."""
        try:
            return self._run()
        finally:
            self._stop_child()

    def _run(self):
        self.t0 = self.clock()
        self.record = start_records.StartRecord(self.s.starts_dir, self.wall0, os.getpid(), self.s.keep_starts,
                                                warn=self.say)
        restarts = None
        state, _why = systemd_unit.read_unit(self.s.unit, 5.0) if self.notify.enabled else (None, None)
        if state is not None:
            restarts = state.to_obs().get("restarts")
        self.record.update(unit=self.s.unit, restarts=restarts)
        self.attempt = (restarts or 0) + 1
        self.outlook = self._open_outlook()
        self.outlook.begin_attempt(self.attempt)
        self._observe_only_or_not()
        self.api_key, why = self._read_key()
        if why:
            self.say(why)
            return self._finish("failed", "starting", CONFIG_ERROR, "API key file unreadable", exit_code(CONFIG_ERROR))
        if self.stop_requested.is_set():
            return self._finish("stopped", "starting", "starting", "stopped by systemd (SIGTERM) before the start", 0)
        if self.cache_watch is not None and not self.serves_cache:
            try:
                self.start_kind = self._wait_for_daemon()
            except _Stopped:
                return self._finish("stopped", "starting", "starting", "stopped by systemd (SIGTERM) while waiting "
                                    "for the weight cache daemon", 0)
            self._record_start_kind()
            if self.outlook is not None:
                self.outlook.attached_weight_cache(self.start_kind.warm)
            self.t0 = self.clock()   # the start is the engine's, from its launch
        try:
            self._spawn(log_filter.blanker(self.api_key))
        except OSError as e:
            self.say("cannot start %s: %s" % (self.argv[0] if self.argv else "the server", e.strerror))
            return self._finish("failed", "starting", CONFIG_ERROR, "cannot start the server: %s" % e.strerror,
                                exit_code(CONFIG_ERROR))
        self.say("started %s (pid %d); this start: %s" % (self.s.unit, self.child.pid, self.record.path))
        try:
            outcome = self._watch_start()
            a = outcome.assessment
            if a.verdict != "ready" or not completion_ok(outcome.observation):
                verdict = a.verdict if a.verdict in ("stalled", "failed") else "stalled"
                return self._fail(verdict, a.phase, a.reason_code, a.reason, a.to_dict())
            ready_after = round(a.t, 1)
            self.record.update(verdict="ready", phase="ready", reason_code="ready", reason=a.reason,
                               ready_after_s=ready_after,
                               phase_durations=start_records.time_in_phases(self.phase_entries, a.t))
            self.say("ready after %s: %s" % (fmt_duration(ready_after), a.reason))
            if self.start_kind is not None and self.start_kind.warm and not self.start_kind.attached:
                # launched warm, but the engine never said it attached: not a warm start
                self.start_kind.kind, self.start_kind.reason = weight_cache.RESTART_COLD, weight_cache.REASON_NOT_ATTACHED
                self._record_start_kind()
            kind = "" if self.start_kind is None else "%s%s start" % (SEP, self.start_kind.words())
            self.notify.ready("ready after %s%s%s%s" % (fmt_duration(ready_after), kind, SEP, a.reason))
            if self.outlook is not None:
                self.outlook.finish("ready", "ready", self.attempt)
            if self.once:
                self.say("--once: the start is decided (ready); stopping the server")
                self._stop_child()
                return self._finish("ready", "ready", "ready", a.reason, 0)
            code, reason = self._serve_cache() if self.serves_cache else self._serve()
            return self._fail("failed", "ready", code, reason)
        except _Stopped:
            self.say("stop requested: stopping the server")
            self.notify.stopping("stopping the server")
            self._stop_child()
            verdict = self.record.record["verdict"]
            if self.outlook is not None and verdict == "running":
                self.outlook.finish("interrupted", "stopped", self.attempt)
            return self._finish("stopped" if verdict == "running" else verdict, self.record.record["phase"],
                                self.record.record["reason_code"], "stopped by systemd (SIGTERM)", 0)


def liveness_state(answer, serving):
    """What one liveness check says: "serving" (a completion answered, or the server's work
    moved meanwhile), AUTH_MISMATCH (the completion was refused for its key: the
    server answered) or "miss"."""
    if answer["ok"] or serving:
        return "serving"
    if answer["status"] in AUTH_REFUSED:
        return AUTH_MISMATCH
    return "miss"


def _unanswered(answer):
    """How a liveness completion that did not answer ended, in words."""
    return "%s after %.0f ms" % ("answered %s" % answer["status"] if answer["status"] else "unanswered", answer["ms"])


def _peak_rss_kib():
    """This process's peak resident memory: VmHWM, of this program only (getrusage's
    ru_maxrss keeps the peak of the process image before exec, e.g. a large parent's)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _cpu_s():
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)   # the probe's commands, reaped each poll
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


USAGE = "usage: sglang-supervisor --settings FILE.json [--once] -- SERVER ARGV...\n"


def main(argv, notifier=None):
    """sglang-supervisor --settings FILE.json [--once] -- SERVER ARGV...; the exit status. Nothing
    escapes as a traceback: a bad setting is one line and the supervisor_config status
    before anything is started; any other exception is one line and the supervisor_fault
    status, after the server was stopped."""
    sup = None
    try:
        once = len(argv) > 2 and argv[2] == "--once"
        server_at = 4 if once else 3
        if len(argv) <= server_at or argv[0] != "--settings" or argv[server_at - 1] != "--":
            sys.stderr.write(USAGE)
            return exit_code(CONFIG_ERROR)
        try:
            settings = SupervisorSettings.load(argv[1])
        except ValueError as e:
            sys.stderr.write("sglang-supervisor: %s\n" % e)
            return exit_code(CONFIG_ERROR)
        sup = Supervisor(settings, argv[server_at:], notifier=notifier, once=once)
        signal.signal(signal.SIGTERM, lambda *_: sup.stop_requested.set())
        signal.signal(signal.SIGINT, lambda *_: sup.stop_requested.set())
        status = sup.run()
    except BaseException as exc:   # pylint: disable=broad-exception-caught  # the last resort
        if sup is None:
            _last_words("%s: %s: %s (before the server was started)" % (SUPERVISOR_FAULT, type(exc).__name__, exc))
            return exit_code(SUPERVISOR_FAULT)
        status = sup.fault(exc)
    sup.say(exit_words(status))
    return status


def _last_words(text):
    try:
        sys.stderr.write("sglang-supervisor: %s\n" % text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _where(exc):
    """file:line of the innermost frame of exc's traceback, or ""."""
    tb = exc.__traceback__
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    return "%s:%d" % (os.path.basename(tb.tb_frame.f_code.co_filename), tb.tb_lineno)


def exit_words(status):
    """The supervisor's last journal line: its exit status and what systemd does next."""
    cls = class_of_exit_code(status)
    if cls is None:
        return "exit %d" % status
    return "exit %d: %s (%s); %s" % (status, cls.code, cls.title, (
        "systemd restarts the unit" if cls.restart_helps else "a restart cannot help, the unit stays failed: " + cls.why))
