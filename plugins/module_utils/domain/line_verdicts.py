"""Rule 1 in the detector, and the dead process: what this poll's channels say about the open
lethal-line hypothesis (line_confirmation.py), and the `failed` Assessment when it is confirmed
or the process went. Pure, no I/O.

A soft line is weighed against the poll's signs of life (rule 2) and stall signature (rule 3);
a sticky one against progress only, never CPU time or GPU utilisation.
"""
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.assessment import Assessment
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.durations import fmt_duration
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.failure_classes import FAILURE_CLASSES
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.line_confirmation import CONFIRMED_DEAD, CONFIRMED_FROZEN, SURVIVED


class LineVerdicts:
    """Reads the detector's channels (log, processes, GPUs, stacks) for the line confirmation."""

    def __init__(self, settings, lines, phases, log, procs, gpus, stacks):
        self.settings = settings
        self.lines = lines      # line_confirmation.LineConfirmation
        self.phases = phases    # phases.PhaseModel
        self.log = log          # log_reading.LogReading
        self.procs = procs      # process_readings.ProcessReadings
        self.gpus = gpus        # gpu_readings.GpuReadings
        self.stacks = stacks    # stack_samples.StackSamples

    def judge(self, t, dead, moved, evidence, progress):
        """Rule 1, and the dead process: `failed` when the process went (named after a lethal
        line of the last line_confirm_window_s, survived or not), or when the start froze after
        a lethal line; None otherwise. A sign of life after the line means it was survived."""
        h = self.lines.open
        if h is None and not dead and not self.lines.survived:
            return None
        if h is None or dead:
            life, frozen = [], None
        elif h.sticky:
            life, frozen = self._progress_after_line(h, moved), None
        else:
            life, frozen = self._after_line(t, h, moved)
        outcome, hyp = self.lines.judge(t, dead, life, frozen)
        if self.lines.survived:
            evidence["survived_lines"] = evidence.get("survived_lines", []) + [x.line[:300] for x in self.lines.survived[-3:]]
        if outcome == SURVIVED:
            evidence["survived_by"] = life or ["no confirmation within %s" % fmt_duration(self.settings.line_confirm_window_s)]
        if outcome in (CONFIRMED_DEAD, CONFIRMED_FROZEN):
            return self._confirmed(t, outcome, hyp, dead, evidence, progress)
        if not dead:
            return None
        evidence["rule"] = "dead process"
        last = self.log.survivable
        if last is not None and t - last[0] <= self.settings.fatal_death_window_s:
            words = "%s, and the process went: %s; %s" % (FAILURE_CLASSES[last[1]].title, last[2][:200], dead)
            return Assessment(t, self.phases.phase, "failed", last[1], words, evidence, progress)
        return Assessment(t, self.phases.phase, "failed", "process_exited", dead, evidence, progress)

    def _confirmed(self, t, outcome, hyp, dead, evidence, progress):
        """The `failed` Assessment of a confirmed hypothesis, named after its line and what confirmed it."""
        words = "%s: %s" % (FAILURE_CLASSES[hyp.code].title, hyp.line[:240])
        if outcome == CONFIRMED_DEAD:
            evidence["rule"] = "rule 1: lethal line confirmed by the process exiting"
            words += "; %s" % dead
        elif hyp.sticky:
            quiet = t - (hyp.seen_t if hyp.progress_t is None else hyp.progress_t)
            evidence["rule"] = "rule 1: sticky line confirmed by no progress after it (%s, whatever the utilisation)" % (
                fmt_duration(quiet))
            evidence["line_kind"] = "sticky"
            words += "; no progress for %s after it" % fmt_duration(quiet)
        else:
            evidence["rule"] = "rule 1: lethal line confirmed by the start freezing after it (%s)" % self._freeze_words(t)
        return Assessment(t, hyp.phase, "failed", hyp.code, words, evidence, progress)

    def _progress_after_line(self, h, moved):
        """Rule 2's progress since a sticky line: the channels that moved this poll and an
        ordinary log line printed after it (the error's own traceback, the launcher's
        reaction and the server's teardown are part of the error); never CPU time or GPU
        utilisation."""
        progress = [m for m in moved if m not in ("log", "compile")]
        if self.log.ordinary_t is not None and self.log.ordinary_t > h.t:
            progress.append("log")
        return sorted(set(progress))

    def _after_line(self, t, h, moved):
        return self.signs_after(t, h.t, moved)

    def signs_after(self, t, since_t, moved):
        """(signs of life, frozen) of this poll after an event at `since_t` (a lethal line, a
        child leaving). frozen is True for a
        stall signature (spinning GPUs, stopped processes, CPU idle with GPUs idle or unread,
        or unread GPUs and a CPU pinned at a steady rate), False when the poll shows work, and
        None when it says nothing (no fresh CPU reading)."""
        sig = self._signals(t)
        life = [m for m in moved if m not in ("log", "bar", "http")]
        if "bar" in moved or "http" in moved:
            life.append("progress")
        if self.log.life_log_t is not None and self.log.life_log_t > since_t:
            life.append("log")
        gpus = sig["gpus"]
        # a GPU going from idle to spinning is the freeze starting, not kernels finishing
        bursting = gpus is not None and gpus.between
        if bursting:
            life.append("gpu_burst")
        spinning = gpus is not None and not bursting and len(gpus.spinning) >= self.settings.spin_min_gpus
        if not sig["cpu_fresh"] and not sig["stopped"]:
            return sorted(set(life)), None
        if sig["stopped"] or spinning:
            return sorted(set(life)), True
        if sig["cpu_idle"]:
            return sorted(set(life)), sig["gpus"] is None or sig["gpus"].all_idle
        # the CPU is busy: work, unless the GPUs are unread, the rate is pinned and stacks show
        # every rank waiting on the host (busy-polling a collective). Rule 5: a pinned CPU with
        # no GPU reading and no stacks is never a freeze (a long CPU-bound phase looks the same).
        if sig["gpus"] is None and self.procs.cpu_pinned() and self.stacks.ranks_wait_on_host(t):
            return sorted(set(life)), True
        life.append("cpu")
        return sorted(set(life)), False

    def _freeze_words(self, t):
        """What froze, for the rule's words."""
        sig = self._signals(t)
        if sig["stopped"]:
            return "every process stopped"
        if sig["gpus"] is not None and sig["gpus"].spinning:
            return "GPUs %s spinning, nothing else moving" % sig["gpus"].spinning
        if sig["cpu_idle"]:
            return "CPU %.0f%%, %s" % (self.procs.cpu_pct, "GPUs idle" if sig["gpus"] is not None else "no GPU reading")
        return "CPU pinned at %.0f%% with nothing else moving, no GPU reading" % self.procs.cpu_pct

    def _signals(self, t):
        """The hardware's view of this poll: fresh GPUs, a CPU reading taken now, CPU idle, every process stopped."""
        cpu_known = self.procs.cpu_known(t)
        gpus = self.gpus.fresh(t)
        return {"cpu_fresh": cpu_known and self.procs.cpu_t == t, "cpu_idle": cpu_known and self.procs.cpu_idle(gpus),
                "gpus": gpus, "stopped": self.procs.stopped}
