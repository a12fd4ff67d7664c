"""Rule 5, blind on power: when no reading says whether the GPUs spin or compute (no GPU
reading of the start's own, or GPUs pinned without a power reading), every rank's stack
identical in one wait (a collective, a synchronize) is weighed against what the phase
usually takes: the host's history of it (blind_wait_history_s), else the phase's default
(blind_wait_usual_s). blind_wait_usual_x times that, and at least blind_wait_min_s, is a
stall. Pure, no I/O.
"""
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import phase_seconds
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.durations import fmt_duration
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.wait_frames import wait_frame

RULE = "rule 5: identical stacks in one wait past the phase's bound, GPU power unknown"


class BlindWaits:
    """The phases' bounds, and whether a poll's stacks have outlasted theirs."""

    def __init__(self, settings):
        self.settings = settings
        self._usual_s = phase_seconds(settings.blind_wait_usual_s, "blind_wait_usual_s")
        self._history_s = phase_seconds(settings.blind_wait_history_s, "blind_wait_history_s")

    def bound(self, phase):
        """(bound s, usual s, where the usual came from) for `phase`."""
        s = self.settings
        if phase in self._history_s:
            usual, source = self._history_s[phase], "the host's history"
        else:
            usual = self._usual_s.get(phase, max(self._usual_s.values(), default=s.blind_wait_min_s))
            source = "the default"
        return max(s.blind_wait_min_s, s.blind_wait_usual_x * usual), usual, source

    def judge(self, seen, gpu_active, evidence):
        """(reason code, reason) once the stacks of a Silence `seen` stayed identical in one
        wait past the phase's bound with the power unknown and nothing else at work; else None."""
        s, gpus, since = self.settings, seen.gpus, seen.same_stacks_since
        if since is None or seen.same_stacks_count < 2 or seen.t - seen.last_stack_t > 3 * s.stacks_interval_s:
            return None
        if gpus is not None and not (gpus.spinning and gpus.spin_power_unknown):
            return None   # GPUs idle, at work, or at a spin's power: the other signatures read them
        # kernels coming and going, or the host waking for work, after the first identical sample: not one wait
        if gpu_active or (seen.gpu_active_t or since) > since or (seen.cpu_burst_t or since) > since \
                or seen.compilers or not seen.stacks or seen.stacks[-1][0] != seen.last_stack_t:
            return None
        sample = seen.stacks[-1][1]
        waits = [wait_frame(frames, s.stack_collective_depth) for frames in sample.values()]
        held_s = seen.last_stack_t - since
        bound_s, usual_s, source = self.bound(seen.phase)
        if not waits or not all(waits) or held_s < bound_s:
            return None
        evidence["rule"] = RULE
        evidence["stacks"] = {"ranks": len(sample), "samples": seen.same_stacks_count, "held_s": round(held_s, 1),
                              "wait_frame": waits[0], "bound_s": bound_s, "usual_s": usual_s, "usual_from": source}
        words = "%d GPU(s) at >= %d%% utilisation without a power reading" % (len(gpus.spinning), s.spin_util_pct) \
            if gpus is not None else "no GPU reading"
        reason = ("all %d sampled ranks show the same stack, in %s, on %d samples over %s (%s), past %s: %.3g x the "
                  "%s %s usually takes (%s)") % (
            len(sample), waits[0], seen.same_stacks_count, fmt_duration(held_s), words, fmt_duration(bound_s),
            s.blind_wait_usual_x, fmt_duration(usual_s), seen.phase, source)
        return ("stall_spin" if gpus is not None else "stall_wait_stacks"), reason
