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
  moving are a hang_after_ready (serving_liveness.py). A weight cache daemon's unit is
  ready by its ready files and live while they name live daemons.
- An engine beside the weight cache waits for its daemon before it is launched and
  starts warm or cold as the restart playbook decides (engine_cache_start.py).
- A stall or failure: diagnostics first (stopped_start_diagnostics.py), then the server
  is stopped (server_process.py) and the supervisor exits with the failure class's status
  (failure_classes.py); systemd restarts the unit unless that status is in
  RestartPreventExitStatus=.
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
import os
import signal
import sys
import threading
import time

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import systemd_unit
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import weight_cache
from ansible_collections.sglang_ops.serving.plugins.module_utils.records import start_records
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_history import with_phase_history
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.inert_text import inert
from ansible_collections.sglang_ops.serving.plugins.module_utils.services import log_filter, log_pump, observe_only, sd_notify
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector import Detector
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.durations import fmt_duration
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import from_overrides
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.failure_classes import class_of_exit_code, exit_code
from ansible_collections.sglang_ops.serving.plugins.module_utils.host.probe import ProbeRequest, probe
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.progress_line import SEP, progress_line
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.engine_cache_start import EngineCacheStart
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.server_process import ServerProcess
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.serving_liveness import ServingLiveness
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.start_outlook import StartOutlook
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.start_watch import (
    TraceTarget, WatchOptions, completion_ok, watch_start)
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.stopped_start_diagnostics import write_diagnostics
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.supervisor_cost import SupervisorCost
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.supervisor_settings import SupervisorSettings
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.weight_cache_watch import WeightCacheWatch

CONFIG_ERROR = "supervisor_config"
SUPERVISOR_FAULT = "supervisor_fault"


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
        """One probe of the server's process tree, GPUs and HTTP (a weight cache daemon: its
        ready files instead of HTTP); the unit is the server process, the log the pump's
        lines since the last poll (not a journal cursor, nor since_epoch_s: the pump has
        held them since the start)."""
        del cursor, since_epoch_s
        sup = self.sup
        s, child = sup.s, sup.server.child
        req = ProbeRequest(pid=child.pid, base_url=None if sup.serves_cache else s.base_url, model=s.model,
                           completion="auto", api_key=sup.api_key,
                           stacks=bool(stacks and s.stacks), venv_bin=s.venv_bin, nvidia_smi=s.nvidia_smi)
        result = probe(req)
        obs = result["observation"]
        obs["ts"] = round(sup.clock(), 3)   # the start's timeline, not the probe's wall clock
        missing = result["missing"]
        for key in ("unit", "log", "process") + (("http",) if sup.serves_cache else ()):
            missing.pop(key, None)
        if sup.serves_cache:
            obs["weight_cache"] = sup.cache_watch.observation(sup.cache_watch.check(launcher_pid=child.pid))
        obs["unit"] = sup.server.unit_view()
        obs["log"], dropped = sup.server.pump.drain()
        if dropped:
            missing["log_truncated"] = "%d lines dropped since the last poll (more than %d lines or %d KiB); " \
                "the journal has them all" % (dropped, log_pump.PENDING_RECORDS, log_pump.PENDING_BYTES // 2**10)
            sup.say("%d lines of the server's output were not kept for the detector since the last poll "
                    "(a flood; the journal has them all)" % dropped)
        return result

    def clock(self):
        return self.sup.clock()

    def sleep(self, seconds):
        self.sup._sleep(seconds)

    def emit(self, line):
        del line   # the progress line goes out with each poll (STATUS=), see Supervisor._on_poll


class Supervisor:
    """One start of the server, from its launch to its end: what is decided when, and what
    is written and said about it. The server's process lives in server_process.py, an
    engine's wait for its weight cache daemon in engine_cache_start.py, the checks after
    ready in serving_liveness.py, the diagnostics of a failed start in
    stopped_start_diagnostics.py.

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
        self.notify = notifier or sd_notify.Notifier()
        self.wall, self.mono = wall, mono
        self.wall0, self.mono0 = wall(), mono()
        self.out_fd = out_fd
        self.stop_requested = threading.Event()
        self.server = ServerProcess(argv, out_fd, self.clock, self.say, settings.stop_timeout_s)
        self.record = None
        self.api_key = None      # the key the server was started with, read once before it is
        self.phase_entries = []
        self.t0 = None
        self.last_line = ""
        self.last_obs = {}
        self.cost = SupervisorCost()
        self.outlook = None      # StartOutlook: the ETA, and the metrics file when metrics_dir is set
        self.attempt = 1         # systemd's restarts of the unit so far, plus one
        self.observe_only = None  # a observe_only_decision.ObserveOnly when rule 4 holds this start unkilled
        # the weight cache daemon this unit is (serves weight_cache) or attaches to; None: none
        self.cache_watch = WeightCacheWatch(
            settings.weight_cache_ready_template, settings.nvidia_smi,
            daemon_unit=None if self.serves_cache else weight_cache.daemon_unit(settings.unit)) \
            if settings.weight_cache_ready_template else None
        self.cache_start = None  # EngineCacheStart of an engine attaching to the daemon

    @property
    def serves_cache(self):
        """This unit runs the weight cache daemon (ready by its ready files, no HTTP)."""
        return self.s.serves == weight_cache.SERVES_WEIGHT_CACHE

    @property
    def start_kind(self):
        """weight_cache.StartKind of an engine attaching to the daemon, once it waited; else None."""
        return self.cache_start.start_kind if self.cache_start is not None else None

    def clock(self):
        """The start's timeline in epoch seconds (see the class): monotonic underneath."""
        return self.wall0 + (self.mono() - self.mono0)

    # ------------------------------------------------------------------ output
    def say(self, text):
        """One journal line (what a record named in it held is escaped: one line, no control
        characters); a journal that cannot be written is no reason to stop."""
        try:
            log_filter.write_all(self.out_fd, ("sglang-supervisor: %s\n" % inert(text)).encode("utf-8", "replace"))
        except OSError:
            pass

    def _sleep(self, seconds):
        if self.stop_requested.wait(seconds):
            raise _Stopped()

    # ------------------------------------------------------------------ each poll
    def _on_poll(self, obs, a):
        self.last_obs = obs
        if not self.phase_entries or self.phase_entries[-1][0] != a.phase:
            self.phase_entries.append((a.phase, obs["t"]))
            self.say("phase %s at %s" % (a.phase, fmt_duration(obs["t"])))
        # The outlook runs here rather than in the watch, so the ETA is in STATUS= and the record.
        if self.cache_start is not None:
            self.cache_start.on_poll(obs)
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
                           supervisor=self.cost.sample(self.record.record["polls"]))
        self.record.prune_step()   # the launch never waits on old starts: a slice a poll

    # ------------------------------------------------------------------ the start
    def _watch_start(self):
        """The collection's watch (start_watch.watch_start) with this process as its host access."""
        held = "" if self.observe_only is None else "; " + observe_only.words(self.observe_only)
        options = WatchOptions(
            poll_s=self.s.poll_s, start_timeout_s=self.s.start_timeout_s or float("inf"),
            settings=with_phase_history(from_overrides(self.s.detector), self.outlook.history if self.outlook else None),
            trace=TraceTarget(self.record.trace_path, "start-" + self.record.name, self.s.unit,
                              "start of %s watched by its supervisor%s" % (self.s.unit, held),
                              open_writer=self._open_trace),
            outlook=None, recorded_outlook=self.outlook,   # the outlook runs in _on_poll; the trace records it
            observe_only=self.observe_only, server_argv=self.server.argv)
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
        """After READY, until the server no longer serves: (failure class, words)."""
        liveness = ServingLiveness(self.s, self.server, self.api_key, self.notify, self.say, self._sleep)
        return liveness.cache_daemon(self.cache_watch) if self.serves_cache else liveness.completions()

    def _finish(self, verdict, phase, reason_code, reason, status):
        end_t = round(self.clock() - self.t0, 1)
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
            write_diagnostics(self.record, self.server, self.s, assessment, self.last_obs)
        finally:
            self.server.stop()
        self._count_failure(code, status)
        # which rule decided: rule 4's memory skips starts a dead process ended (observe_only_decision)
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
        self.server.kill()
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

    def run(self):
        """The start, from spawning the server to its end; the exit status. The server is
        stopped on every way out of here (a stop, a failure, an exception)."""
        try:
            return self._run()
        finally:
            self.server.stop()

    def _run(self):
        self.t0 = self.clock()
        self.record = start_records.StartRecord(self.s.starts_dir, self.wall0, os.getpid(), self.s.keep_starts,
                                                warn=self.say)
        self._begin_attempt()
        self._observe_only_or_not()
        self.api_key, why = _read_key(self.s)
        if why:
            self.say(why)
            return self._finish("failed", "starting", CONFIG_ERROR, "API key file unreadable", exit_code(CONFIG_ERROR))
        if self.stop_requested.is_set():
            return self._finish("stopped", "starting", "starting", "stopped by systemd (SIGTERM) before the start", 0)
        if self.cache_watch is not None and not self.serves_cache:
            self.cache_start = EngineCacheStart(self.s, self.cache_watch, self.record, self.outlook, self.notify,
                                                self.say, self._sleep, self.mono, self.wall)
            try:
                self.cache_start.wait()
            except _Stopped:
                return self._finish("stopped", "starting", "starting", "stopped by systemd (SIGTERM) while waiting "
                                    "for the weight cache daemon", 0)
            self.t0 = self.clock()   # the start is the engine's, from its launch
        elif self.serves_cache:
            for words in self.cache_watch.clear_planted():
                self.say("warning: %s" % words)
        try:
            self.server.spawn(log_filter.blanker(self.api_key))
        except OSError as e:
            argv = self.server.argv
            self.say("cannot start %s: %s" % (argv[0] if argv else "the server", e.strerror))
            return self._finish("failed", "starting", CONFIG_ERROR, "cannot start the server: %s" % e.strerror,
                                exit_code(CONFIG_ERROR))
        self.say("started %s (pid %d); this start: %s" % (self.s.unit, self.server.child.pid, self.record.path))
        try:
            return self._watch_and_serve()
        except _Stopped:
            return self._stopped()

    def _begin_attempt(self):
        """The attempt this start is (systemd's restarts of the unit, read when systemd runs
        it), in the record and the outlook opened for it."""
        restarts = None
        state, _why = systemd_unit.read_unit(self.s.unit, 5.0) if self.notify.enabled else (None, None)
        if state is not None:
            restarts = state.to_obs().get("restarts")
        self.record.update(unit=self.s.unit, restarts=restarts)
        self.attempt = (restarts or 0) + 1
        self.outlook = _open_outlook(self.s, self.say)
        self.outlook.begin_attempt(self.attempt)

    def _watch_and_serve(self):
        """The spawned server watched to its verdict, then (unless --once) served until it
        no longer does; the exit status."""
        outcome = self._watch_start()
        a = outcome.assessment
        if a.verdict != "ready" or not completion_ok(outcome.observation):
            verdict = a.verdict if a.verdict in ("stalled", "failed") else "stalled"
            return self._fail(verdict, a.phase, a.reason_code, a.reason, a.to_dict())
        self._ready(a)
        if self.once:
            self.say("--once: the start is decided (ready); stopping the server")
            self.server.stop()
            return self._finish("ready", "ready", "ready", a.reason, 0)
        code, reason = self._serve()
        return self._fail("failed", "ready", code, reason)

    def _ready(self, a):
        """The start came up ready (a: the watch's final assessment): the record, the
        journal, READY=1 and the metrics say so."""
        ready_after = round(a.t, 1)
        self.record.update(verdict="ready", phase="ready", reason_code="ready", reason=a.reason,
                           ready_after_s=ready_after,
                           phase_durations=start_records.time_in_phases(self.phase_entries, a.t))
        self.say("ready after %s: %s" % (fmt_duration(ready_after), a.reason))
        if self.cache_start is not None:
            self.cache_start.on_ready()
        kind = "" if self.start_kind is None else "%s%s start" % (SEP, self.start_kind.words())
        self.notify.ready("ready after %s%s%s%s" % (fmt_duration(ready_after), kind, SEP, a.reason))
        if self.cache_start is not None:
            self.cache_start.after_ready()
        if self.outlook is not None:
            self.outlook.finish("ready", "ready", self.attempt)

    def _stopped(self):
        """SIGTERM during the start or while serving: the server is stopped and the start
        recorded as stopped (or as what it was decided to be); exit 0."""
        self.say("stop requested: stopping the server")
        self.notify.stopping("stopping the server")
        self.server.stop()
        verdict = self.record.record["verdict"]
        if self.outlook is not None and verdict == "running":
            self.outlook.finish("interrupted", "stopped", self.attempt)
        return self._finish("stopped" if verdict == "running" else verdict, self.record.record["phase"],
                            self.record.record["reason_code"], "stopped by systemd (SIGTERM)", 0)


def _read_key(settings):
    """The API key the server is about to be started with; (key, why) with why set when
    the file cannot be read (the supervisor then fails closed)."""
    if not settings.api_key_file:
        return None, None
    try:
        return log_filter.read_key(settings.api_key_file), None
    except (OSError, ValueError) as e:
        return None, "cannot read the API key from %s (%s)" % (settings.api_key_file, getattr(e, "strerror", None) or e)


def _open_outlook(settings, say):
    """The start's StartOutlook (the ETA, the metrics file); without the history when it
    cannot be read."""
    try:
        return StartOutlook.on_host(settings.unit, settings.metrics_dir, settings.starts_dir, warn=say,
                                    host=settings.host)
    except (OSError, ValueError) as e:   # an unreadable history or metrics file costs the ETA, not the start
        say("warning: the start history or metrics file cannot be read (%s); no ETA this start" % e)
        return StartOutlook(settings.unit, warn=say, host=settings.host)


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
