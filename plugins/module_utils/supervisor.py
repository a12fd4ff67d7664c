"""The unit's supervisor: the ExecStart of a Type=notify unit, running the SGLang server
as its child in the same cgroup and watching every start with the restart action's
probe, detector and watch loop (docs/architecture.md, "Every start watched").

    python3 -I sglang-supervisor --settings FILE.json -- SERVER ARGV...

- The server's output passes through the log filter (module_utils/log_filter.py) into
  the journal, and each line is handed to the detector as it arrives.
- Every poll: one probe of the server's process tree, GPUs and HTTP, the detector, a
  line in the start's trace (module_utils/start_records.py), STATUS= with the progress
  line, EXTEND_TIMEOUT_USEC= while no final verdict is reached.
- READY=1 only after a one-token completion succeeded. Then a completion every
  liveness_interval_s: WATCHDOG=1 after each answer (or while /metrics shows tokens being
  generated); liveness_misses misses in a row are a hang_after_ready.
- A stall or failure: diagnostics first, then the server is stopped and the supervisor
  exits with the failure class's status (failure_classes.py); systemd restarts the unit
  unless that status is in RestartPreventExitStatus=.
- SIGTERM (systemctl stop): the server is stopped, the start recorded as stopped, exit 0.
- Every progress line carries the ETA from the host's earlier starts (module_utils/
  start_outlook.py); with metrics_dir set, the start's metrics file (phase, ETA,
  restarts, hangs after ready) is rewritten there every poll for node_exporter.
"""
import collections
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, fields

from ansible_collections.sglang_ops.serving.plugins.module_utils import (
    bounded_run, http_check, log_filter, nvidia_smi, procfs, prometheus_text, pyspy, sd_notify, sglang_dialect, start_records, systemd_unit)
from ansible_collections.sglang_ops.serving.plugins.module_utils.api_key_config import read_api_key
from ansible_collections.sglang_ops.serving.plugins.module_utils.detector import Detector
from ansible_collections.sglang_ops.serving.plugins.module_utils.durations import fmt_duration
from ansible_collections.sglang_ops.serving.plugins.module_utils.detector_settings import DetectorSettings
from ansible_collections.sglang_ops.serving.plugins.module_utils.failure_classes import class_of_exit_code, exit_code
from ansible_collections.sglang_ops.serving.plugins.module_utils.probe import ProbeRequest, probe
from ansible_collections.sglang_ops.serving.plugins.module_utils.progress_line import SEP, progress_line
from ansible_collections.sglang_ops.serving.plugins.module_utils.start_outlook import StartOutlook
from ansible_collections.sglang_ops.serving.plugins.module_utils.start_watch import (
    TraceTarget, WatchOptions, completion_ok, watch_start)

CONFIG_ERROR = "supervisor_config"
LOG_TAIL_LINES = 400


@dataclass
class SupervisorSettings:
    """The settings file the sglang_service role writes (one JSON object)."""
    unit: str = "sglang"
    base_url: str = "http://127.0.0.1:30000"
    model: str = "default"
    api_key_file: object = None
    starts_dir: str = start_records.DEFAULT_ROOT
    keep_starts: int = 20
    poll_s: float = 10.0
    detector: dict = field(default_factory=dict)
    # Each poll without a final verdict moves systemd's start timeout this far ahead.
    extend_timeout_s: float = 600.0
    # Hard bound on a start, 0 for none (TimeoutStartSec= is the safety net).
    start_timeout_s: float = 0.0
    stop_timeout_s: float = 60.0
    liveness_interval_s: float = 30.0
    liveness_timeout_s: float = 60.0
    liveness_misses: int = 3
    stacks: bool = True
    venv_bin: object = None
    nvidia_smi: str = "nvidia-smi"
    # node_exporter's textfile folder for the start metrics, None for none.
    metrics_dir: object = None

    @classmethod
    def load(cls, path):
        """Settings from a JSON file; ValueError with one line naming the problem."""
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except OSError as e:
            raise ValueError("cannot read the settings file %s: %s" % (path, e.strerror))
        except ValueError as e:
            raise ValueError("the settings file %s is not JSON: %s" % (path, e))
        if not isinstance(data, dict):
            raise ValueError("the settings file %s must hold a JSON object" % path)
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ValueError("unknown setting(s) in %s: %s" % (path, ", ".join(unknown)))
        settings = cls(**data)
        for name in ("poll_s", "extend_timeout_s", "stop_timeout_s", "liveness_interval_s", "liveness_timeout_s"):
            value = getattr(settings, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ValueError("%s in %s must be a positive number, got %r" % (name, path, value))
        if not isinstance(settings.liveness_misses, int) or settings.liveness_misses < 1:
            raise ValueError("liveness_misses in %s must be an integer of at least 1" % path)
        DetectorSettings().with_overrides(settings.detector)   # ValueError names a bad override
        return settings


class _Stopped(Exception):
    """SIGTERM arrived: systemd is stopping the unit."""


class _LogPump(threading.Thread):
    """The server's output: through the log filter to our stdout (the journal), and kept
    for the detector (lines since the last poll) and the diagnostics (the tail)."""

    def __init__(self, fd, blank, out_fd=1):
        super().__init__(name="log-pump", daemon=True)
        self.fd, self.out_fd = fd, out_fd
        self.splitter = log_filter.LineSplitter(blank)
        self.lock = threading.Lock()
        self.pending = []
        self.tail = collections.deque(maxlen=LOG_TAIL_LINES)

    def _take(self, lines):
        if not lines:
            return
        log_filter.write_all(self.out_fd, b"".join(p + b"\n" for p in lines))
        now = round(time.time(), 3)
        with self.lock:
            for raw in lines:
                text = raw.decode("utf-8", "replace")
                self.pending.append({"ts": now, "msg": text})
                self.tail.append(text)

    def run(self):
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            self._take(self.splitter.feed(chunk))
        self._take(self.splitter.close())

    def drain(self):
        with self.lock:
            out, self.pending = self.pending, []
        return out

    def tail_text(self):
        with self.lock:
            return "\n".join(self.tail) + "\n"


class _Observed:
    """The detector, with the supervisor's per-poll work after each observation."""

    def __init__(self, detector, on_poll):
        self.detector, self.on_poll = detector, on_poll

    def observe(self, obs):
        a = self.detector.observe(obs)
        self.on_poll(obs, a)
        return a


class _HostPort:
    """The watch's host port on the host itself: the probe of the server's process tree,
    this process's clock and sleep (which a stop request interrupts)."""

    def __init__(self, sup):
        self.sup = sup

    def probe(self, cursor, stacks):
        return self.sup._probe(cursor, stacks)

    def verb(self, name):
        return 1, "", "the supervisor does not run systemctl %s on its own unit" % name

    def clock(self):
        return self.sup.clock()

    def sleep(self, seconds):
        self.sup._sleep(seconds)

    def emit(self, line):
        del line   # the progress line goes out with each poll (STATUS=), see Supervisor._on_poll


class Supervisor:
    """One start of the server."""

    def __init__(self, settings, argv, notifier=None, clock=time.time, out_fd=1):
        self.s = settings
        self.argv = list(argv)
        self.notify = notifier or sd_notify.Notifier()
        self.clock = clock
        self.out_fd = out_fd
        self.stop_requested = threading.Event()
        self.child = None
        self.pump = None
        self.record = None
        self.phase_entries = []
        self.t0 = None
        self.last_line = ""
        self.last_obs = {}
        self.cpu0 = _cpu_s()
        self.cpu_last = None
        self.cpu_max_poll = 0.0
        self.outlook = None      # StartOutlook: the ETA, and the metrics file when metrics_dir is set
        self.attempt = 1         # systemd's restarts of the unit so far, plus one

    # ------------------------------------------------------------------ output
    def say(self, text):
        log_filter.write_all(self.out_fd, ("sglang-supervisor: %s\n" % text).encode("utf-8", "replace"))

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
        finally:
            os.close(write_fd)
        self.pump = _LogPump(read_fd, blank, self.out_fd)
        self.pump.start()

    def _stop_child(self):
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
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except OSError:
                pass
            child.wait()

    def _unit_view(self):
        """The server process as the detector reads a unit: running, or gone with its status."""
        status = self.child.poll()
        if status is None:
            return {"active": "active", "sub": "running", "main_pid": self.child.pid}
        return {"active": "inactive", "sub": "exited", "main_pid": 0, "exec_main_status": status}

    # ------------------------------------------------------------------ probe
    def _probe(self, cursor, want_stacks, completion="auto"):
        del cursor   # the log comes from the pump, not from a journal cursor
        req = ProbeRequest(pid=self.child.pid, base_url=self.s.base_url, model=self.s.model,
                           completion=completion, api_key_file=self.s.api_key_file,
                           stacks=bool(want_stacks and self.s.stacks), venv_bin=self.s.venv_bin,
                           nvidia_smi=self.s.nvidia_smi)
        result = probe(req)
        obs = result["observation"]
        missing = result["missing"]
        for key in ("unit", "log", "process"):
            missing.pop(key, None)
        obs["unit"] = self._unit_view()
        obs["log"] = self.pump.drain()
        return result

    # ------------------------------------------------------------------ each poll
    def _on_poll(self, obs, a):
        self.last_obs = obs
        if not self.phase_entries or self.phase_entries[-1][0] != a.phase:
            self.phase_entries.append((a.phase, obs["t"]))
            self.say("phase %s at %s" % (a.phase, fmt_duration(obs["t"])))
        line = progress_line(a)
        self.last_line = line
        self.notify.status(line)
        if not a.final:
            self.notify.extend_timeout(self.s.extend_timeout_s)
        self.record.update(phase=a.phase, reason_code=a.reason_code, reason=a.reason, progress=line,
                           polls=self.record.record["polls"] + 1,
                           phase_durations=start_records.time_in_phases(self.phase_entries, obs["t"]),
                           supervisor=self._own_cost())

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
                "max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)}

    # ------------------------------------------------------------------ the start
    def _watch_start(self):
        """The collection's watch (start_watch.watch_start) with this process as its host port."""
        options = WatchOptions(
            poll_s=self.s.poll_s, start_timeout_s=self.s.start_timeout_s or float("inf"),
            settings=DetectorSettings().with_overrides(self.s.detector),
            trace=TraceTarget(self.record.trace_path, "start-" + self.record.name, self.s.unit,
                              "start of %s watched by its supervisor" % self.s.unit),
            outlook=self.outlook)
        return watch_start(_HostPort(self), options, self.t0,
                           new_detector=lambda settings: _Observed(Detector(settings), self._on_poll))

    def _serve(self):
        """After READY: a completion every liveness_interval_s; returns the reason the
        server is no longer serving (process_exited or hang_after_ready) with its words."""
        misses, tokens = 0, _generated_tokens(self.s.base_url)
        while True:
            self._sleep(self.s.liveness_interval_s)
            if self.child.poll() is not None:
                return "process_exited", "the server exited with status %s after ready" % self.child.returncode
            key, dummy_why = read_api_key(self.s.api_key_file)
            answer = http_check.post_completion(self.s.base_url, self.s.model, key, self.s.liveness_timeout_s)
            now_tokens = _generated_tokens(self.s.base_url)
            serving = now_tokens is not None and tokens is not None and now_tokens > tokens
            tokens = now_tokens if now_tokens is not None else tokens
            if answer["ok"] or serving:
                misses = 0
                self.notify.send(WATCHDOG=1, STATUS="ready%sserving%slast check %s" % (
                    SEP, SEP, "completion in %.0f ms" % answer["ms"] if answer["ok"] else "tokens generated"))
                continue
            misses += 1
            words = "completion %s after %.0f ms" % (
                "answered %s" % answer["status"] if answer["status"] else "unanswered", answer["ms"])
            self.say("liveness check missed %d/%d: %s" % (misses, self.s.liveness_misses, words))
            self.notify.status("ready%sliveness check missed %d/%d (%s)" % (SEP, misses, self.s.liveness_misses, words))
            if misses >= self.s.liveness_misses:
                return "hang_after_ready", "%d one-token completions in a row went unanswered (the last: %s) " \
                    "and no tokens were generated meanwhile" % (misses, words)

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

    def _finish(self, verdict, phase, reason_code, reason, status):
        end_t = round(self.clock() - self.t0, 1)
        self.record.update(verdict=verdict, phase=phase, reason_code=reason_code, reason=reason, exit_code=status,
                           ended_at=round(self.clock(), 3),
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
        self._diagnose(assessment)
        self._stop_child()
        self._count_failure(code, status)
        return self._finish(verdict, phase, code, reason, status)

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
        self.t0 = self.clock()
        self.record = start_records.StartRecord(self.s.starts_dir, self.t0, os.getpid(), self.s.keep_starts)
        restarts = None
        state, _why = systemd_unit.read_unit(self.s.unit, 5.0) if self.notify.enabled else (None, None)
        if state is not None:
            restarts = state.to_obs().get("restarts")
        self.record.update(unit=self.s.unit, restarts=restarts)
        self.attempt = (restarts or 0) + 1
        self.outlook = StartOutlook.on_host(self.s.unit, self.s.metrics_dir, self.s.starts_dir, warn=self.say)
        self.outlook.begin_attempt(self.attempt)
        try:
            key = log_filter.read_key(self.s.api_key_file) if self.s.api_key_file else None
        except (OSError, ValueError) as e:
            self.say("cannot read the API key from %s (%s)" % (self.s.api_key_file, getattr(e, "strerror", None) or e))
            return self._finish("failed", "starting", CONFIG_ERROR, "API key file unreadable", exit_code(CONFIG_ERROR))
        try:
            self._spawn(log_filter.blanker(key))
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
            self.notify.ready("ready after %s%s%s" % (fmt_duration(ready_after), SEP, a.reason))
            if self.outlook is not None:
                self.outlook.finish("ready", "ready", self.attempt)
            code, reason = self._serve()
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


def _generated_tokens(base_url):
    """sglang:generation_tokens_total from /metrics, or None."""
    text = http_check.get_text(base_url, "/metrics", 5.0)
    return prometheus_text.sample_sum(text, "sglang:generation_tokens_total") if text else None


def _cpu_s():
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)   # the probe's commands, reaped each poll
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv, notifier=None):
    """sglang-supervisor --settings FILE.json -- SERVER ARGV...; the exit status."""
    if len(argv) < 4 or argv[0] != "--settings" or argv[2] != "--":
        sys.stderr.write("usage: sglang-supervisor --settings FILE.json -- SERVER ARGV...\n")
        return exit_code(CONFIG_ERROR)
    try:
        settings = SupervisorSettings.load(argv[1])
    except (TypeError, ValueError) as e:
        sys.stderr.write("sglang-supervisor: %s\n" % e)
        return exit_code(CONFIG_ERROR)
    sup = Supervisor(settings, argv[3:], notifier=notifier)
    signal.signal(signal.SIGTERM, lambda *_: sup.stop_requested.set())
    signal.signal(signal.SIGINT, lambda *_: sup.stop_requested.set())
    status = sup.run()
    sup.say(exit_words(status))
    return status


def exit_words(status):
    """The supervisor's last journal line: its exit status and what systemd does next."""
    cls = class_of_exit_code(status)
    if cls is None:
        return "exit %d" % status
    return "exit %d: %s (%s); %s" % (status, cls.code, cls.title, (
        "systemd restarts the unit" if cls.restart_helps else "a restart cannot help, the unit stays failed: " + cls.why))
