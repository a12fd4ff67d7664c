"""The stall detector: one observation in, one Assessment out. Pure Python, no I/O.

It composes the five rules of trust (docs/detector.md); `evidence["rule"]` names the one
that decided:
1. no verdict from a line alone: a lethal-looking line is a hypothesis that the process
   exiting or the start freezing after it confirms (line_confirmation.py, weighed against the
   poll's channels by line_verdicts.py);
2. any sign of life defers: progress channels, bursts of GPU utilisation, child processes
   coming and going, stacks that change (life_signs.py);
3. a stall needs a positive signature: frozen, parked (identical stacks in a wait, GPUs
   flat), spinning, stopped (stall_signatures.py), or dead (the unit's main process gone, or a
   rank of it: child_deaths.py); a rank of a server over several nodes waiting at the
   rendezvous waits for a peer, not a stall of this node (peer_wait.py);
4. never keep a server down by our own verdict: observe-only starts (observe_only_gate.py);
5. blind means patient, not deaf: longer windows without GPU readings or stacks, a frozen
   CPU clock or stopped processes decide alone, and a hard ceiling ends every start
   (stall_signatures.py).
The channels are read by one unit each: the log (log_reading.py: records journald cut at
LineMax joined before anything reads them), the unit's processes (process_readings.py), the
GPUs (gpu_readings.py), the stacks (stack_samples.py), the main process (main_process.py), and
HTTP here; readiness.py says when a start is ready.
"""
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import log_lines
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.assessment import Assessment
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.child_deaths import ChildDeaths
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import DetectorSettings
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.gpu_readings import GpuReadings
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.line_confirmation import LineConfirmation
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.line_verdicts import LineVerdicts
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.log_reading import LogReading
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.main_process import MainProcessWatch
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.peer_wait import PEER_MISSING, WAITING_PEER, PeerWait
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.observe_only_gate import CEILING_CODE, OBSERVING, ObserveOnlyGate
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.phases import PhaseModel
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.process_readings import ProcessReadings
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.readiness import is_ready, ready_reason, ready_rule
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.stack_samples import StackSamples
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.stall_signatures import Silence, StallSignatures
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.unit_gpu_memory import UnitGpuMemory


class Detector:
    """Everything it needs comes with the observations; the thresholds are the settings."""

    def __init__(self, settings=None, observe_only=None, layout=None):
        self.settings = settings or DetectorSettings()
        s = self.settings
        self.lines = LineConfirmation(s.line_confirm_window_s, s.line_freeze_min_s, log_lines.fatal_priority,
                                      s.line_sticky_quiet_s)
        self.gate = ObserveOnlyGate(observe_only)
        self.signatures = StallSignatures(s)
        self.phases = PhaseModel()
        # the channels
        self._log = LogReading(s, self.phases, self.lines)
        self._unit = MainProcessWatch()
        self._procs = ProcessReadings(s)
        self._gpus = GpuReadings(s)
        self._unit_memory = UnitGpuMemory()
        self._stacks = StackSamples(s)
        self._children = ChildDeaths(s)
        self._peers = PeerWait(s, layout)   # layout: server_layout.ServerLayout, else from `peers`
        self._http = None         # last http dict
        self._http_rank = None
        self._line_verdicts = LineVerdicts(s, self.lines, self.phases, self._log, self._procs, self._gpus, self._stacks)
        self._held = None         # the Assessment held by the observe-only gate
        self._final = None
        self._polls = 0
        # progress bookkeeping
        self.last_moved = {}
        self._last_progress_t = None

    # ------------------------------------------------------------------ public
    def observe(self, obs):
        """The Assessment of one observation; the same final one for every observation after it."""
        if self._final is not None:
            return self._final
        t = float(obs["t"])
        first = self._polls == 0
        self._polls += 1
        if first:
            self._last_progress_t = t
        moved = []
        facts = {}

        self._log.read(obs.get("log") or (), t, moved, facts)
        dead = self._unit.gone(obs, facts, not first)
        self._procs.read(obs.get("procs"), t, moved, first)
        unit_mem = self._unit_memory.per_gpu(obs)
        self._gpus.read(obs.get("gpus"), t, moved, first, obs.get("gpu_procs"), unit_mem, self._unit_memory.shared_gpus(obs))
        self._gpus.read_missing(obs, t)
        self._read_http(obs.get("http"), t, moved, first)
        self._stacks.read(obs.get("stacks"), t, moved)
        self._children.read(obs, t, self._unit.main_pid, self._log.child_deaths)
        self._peers.read(obs)
        waiting = self._peers.waiting(t, self._log.rendezvous_t, self._log.at_rendezvous)

        for ch in moved:
            self.last_moved[ch] = t
        if moved:
            self._last_progress_t = t
            self.signatures.on_progress()
            self._stacks.on_progress(t)
        progress = self._progress(t)
        evidence = {"moved": sorted(set(moved)), "last_moved": dict(self.last_moved)}
        evidence.update(facts)
        if waiting:
            progress["peer"] = self._peers.words(t)

        if is_ready(obs, self.settings, self._log.ready_line):
            evidence["rule"] = "ready: %s" % ready_rule(obs)
            return self._decide(Assessment(t, "ready", "ready", "ready", ready_reason(obs), evidence, progress))
        failed = self._line_verdicts.judge(t, dead, moved, evidence, progress) or self._child_died(t, moved, evidence, progress)
        if failed is not None and waiting and self._peers.died_of_timeout(t):
            failed = self._peer_missing(t, evidence, progress, "the ranks gave up waiting: " + failed.reason)
        if failed is not None:   # a rank gone is a dead process too (rule 4 holds no verdict on it)
            return self._decide(failed, dead=bool(dead) or (failed.evidence.get("child_died") or {}).get("rank", False))
        if waiting and self._peers.timed_out(t):
            return self._decide(self._peer_missing(t, evidence, progress, "past the rendezvous's timeout"))
        if self.gate.ceiling_reached(t):
            evidence["rule"] = "rule 4: observe-only ceiling"
            return self._decide(Assessment(t, self.phases.phase, "stalled", CEILING_CODE, self.gate.ceiling_words(t),
                                           evidence, progress))
        if moved or first:
            self._held = None
            return Assessment(t, self.phases.phase, "progressing", "progressing" if moved else "starting",
                              self._moving_words(moved), evidence, progress)
        if waiting:
            evidence["rule"] = "rule 3: a rank at the rendezvous of a server over %d nodes waits for a peer, not a stall of this node" % (
                self._peers.layout.nnodes)
            evidence["peer_wait"] = self._peers.evidence(t)
            return Assessment(t, self.phases.phase, "quiet", WAITING_PEER, self._peers.words(t), evidence, progress)
        return self._still_held(self._judge_silence(t, evidence, progress))

    def _child_died(self, t, moved, evidence, progress):
        """Rule 3's dead signature for a child (child_deaths.py): a rank, or a GPU holder the start froze after, gone."""
        gpus = self._gpus.fresh(t)
        death = self._children.judge(t, lambda since_t: self._line_verdicts.signs_after(t, since_t, moved),
                                     gpus is not None and not gpus.all_idle)
        if self._children.left_normally:
            evidence["children_left"] = self._children.left_normally[-5:]
        if death is None:
            return None
        evidence["child_died"] = death.to_evidence()
        evidence["rule"] = ("rule 3: a rank left the unit's processes while the start went on" if death.rank else
                            "rule 3: a GPU holder left the unit and the start froze after it")
        return Assessment(t, self.phases.phase, "failed", "child_died", death.words(), evidence, progress)

    def _peer_missing(self, t, evidence, progress, why):
        """The verdict that pages: the node named never joined this node's rendezvous."""
        evidence["rule"] = "rule 3: a peer node never joined the rendezvous (%s)" % why[:200]
        evidence["peer_wait"] = self._peers.evidence(t)
        evidence["missing_node"] = self._peers.missing_nodes()
        return Assessment(t, self.phases.phase, "failed", PEER_MISSING, self._peers.missing_words(t), evidence, progress)

    def _read_http(self, http, t, moved, first):
        """`http` moves when the health answer got better: refused, timeout, 5xx, 200."""
        if not isinstance(http, dict):
            return
        self._http = http
        health = http.get("health", None)
        rank = 0 if health is None else 1 if health == "timeout" else 3 if health == 200 else 2
        if self._http_rank is None or rank > self._http_rank:
            if self._http_rank is not None or (first and rank > 0):
                moved.append("http")
            self._http_rank = rank
        self.phases.on_http(rank >= 2, t)

    # ------------------------------------------------------------------ decisions
    def _judge_silence(self, t, evidence, progress):
        """Rules 3 and 5 (stall_signatures.py) on what the detector has seen since the last progress."""
        procs, gpus, stacks = self._procs, self._gpus, self._stacks
        cpu_known = procs.cpu_known(t)
        seen = Silence(t=t, phase=self.phases.phase, last_progress_t=self._last_progress_t, cpu_pct=procs.cpu_pct,
                       cpu_known=cpu_known, cpu_idle=cpu_known and procs.cpu_idle(gpus.fresh(t)),
                       gpus=gpus.fresh(t), gpu_active_t=gpus.active_t,
                       gpu_run=gpus.run, smi_since=gpus.smi_since, cpu_burst_t=procs.cpu_bursts.last_t,
                       frozen_s=procs.frozen.held_s(t), stopped=procs.stopped, compilers=procs.compilers,
                       stacks=stacks.since_progress, last_stack_t=stacks.last_t, work_stack_t=stacks.work_t,
                       sync_stack_t=stacks.sync_t, same_stacks_since=stacks.same_since, same_stacks_count=stacks.same_count)
        j = self.signatures.judge(seen, evidence)
        assessment = Assessment(t, seen.phase, j.verdict, j.reason_code, j.reason, evidence, progress, j.want_stacks)
        return self._decide(assessment) if j.verdict == "stalled" else assessment

    def _decide(self, assessment, dead=False):
        """Latch a final verdict, unless the observe-only gate holds it (rule 4): then only a
        dead process or the gate's own ceiling is final."""
        if assessment.verdict in ("stalled", "failed") and not dead and assessment.reason_code != CEILING_CODE \
                and self.gate.active:
            self._held = self.gate.hold(assessment)
            return assessment
        self._final = assessment
        return assessment

    def _still_held(self, assessment):
        """After a held verdict, a start that has not moved since stays `observing`."""
        held = self._held
        if held is None or assessment.verdict == OBSERVING or assessment.final:
            return assessment
        assessment.evidence["held_verdict"] = held.evidence["held_verdict"]
        assessment.evidence["rule"] = held.evidence["rule"]
        assessment.verdict, assessment.reason_code, assessment.reason = held.verdict, held.reason_code, held.reason
        return assessment

    def _moving_words(self, moved):
        if not moved:
            return "first observation"
        shard_bar = self._log.bars.get("shards")
        words = ", ".join(sorted(set(moved)))
        if shard_bar and self.phases.phase == "weight_load":
            return "moving (%s); shards %d/%s" % (words, shard_bar[0], "?" if shard_bar[1] is None else "%d" % shard_bar[1])
        return "moving: %s" % words

    def _progress(self, t):
        gpus = self._gpus.fresh(t, own=False)
        shard_bar = self._log.bars.get("shards")
        procs = self._procs
        http = None
        if self._http is not None:
            h = self._http.get("health")
            http = "refused" if h is None else h
        return {
            "shards_done": None if shard_bar is None else int(shard_bar[0]),
            "shards_total": None if shard_bar is None or shard_bar[1] is None else int(shard_bar[1]),
            "gpu_count": None if gpus is None else gpus.count,
            "gpu_mem_used_mib": None if gpus is None else gpus.mem_used_mib,
            "gpu_mem_total_mib": None if gpus is None else gpus.mem_total_mib,
            "gpu_util_max_pct": None if gpus is None else gpus.util_max_pct,
            "read_bps": procs.read_bps,
            "read_bytes": procs.read_bytes,
            "write_bps": procs.write_bps,
            "cpu_pct": None if procs.cpu_pct is None else round(procs.cpu_pct, 1),
            "http": http,
            "elapsed_s": t,
        }
