"""The detector's py-spy channel: the ranks' stack samples since the last progress. Pure, no I/O.

A sample in which some rank computes (no wait among its innermost frames) is work on the host;
one with every rank in a device synchronize says only the GPUs know whether they work. How long
the samples have stayed identical (since the last progress) is what rule 5 weighs when the GPUs'
power is unknown (stall_signatures.py). Stacks
that changed while a rank computes move the `stacks` channel (ranks that moved into a wait are a
stall starting, not life). The samples feed rule 3's parked signature (stall_signatures.py).
"""
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.life_signs import stacks_changed
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.wait_frames import DEVICE_SYNC, host_wait_frame, wait_frame


class StackSamples:
    """The stack samples of a start and the times of the telling ones."""

    def __init__(self, settings):
        self.settings = settings
        self.since_progress = []  # [(t, {rank: frames})] taken since the last progress
        self.last_t = None        # time of the latest sample
        self.work_t = None        # last stack sample in which a rank was computing, not waiting
        self.sync_t = None        # last stack sample with every rank in a device synchronize
        self.same_since = None    # the first of the samples in a row identical to the latest (since the last progress)
        self.same_count = 0       # how many samples that run holds
        self._last = None         # the latest sample {rank: frames}

    def read(self, stacks, t, moved):
        """Take in one poll's py-spy samples; `stacks` goes into `moved` when a computing rank's stack changed."""
        sample = self._sample(stacks, t)
        if sample is not None:
            changed = stacks_changed(self._last, sample)
            if changed and self.work_t == t:
                moved.append("stacks")   # ranks that moved into a wait are a stall starting, not life
            if changed or self.same_since is None or set(sample) != set(self._last):
                self.same_since, self.same_count = t, 1
            else:
                self.same_count += 1
            self._last = sample

    def _sample(self, stacks, t):
        """{rank: frames} of one poll's samples (kept since the last progress), or None without any."""
        if not isinstance(stacks, list) or not stacks:
            return None
        sample = {}
        for s in stacks:
            key = s.get("rank") if s.get("rank") is not None else s.get("pid")
            sample[key] = tuple(s.get("frames") or ())
        self.since_progress = self.since_progress[-8:] + [(t, sample)]
        self.last_t = t
        depth = self.settings.stack_wait_depth
        waits = [wait_frame(frames, depth) for frames in sample.values() if frames]
        if any(w is None for w in waits):
            self.work_t = t
        elif waits and all(DEVICE_SYNC.search(w) for w in waits):
            self.sync_t = t   # the host waits for the GPU: only the GPU says whether it works
        return sample

    def on_progress(self, t):
        """Something moved at `t`: only samples from then on count as taken since the last progress."""
        self.since_progress = [s for s in self.since_progress if s[0] >= t]
        if self.same_since is not None and self.same_since < t:
            # the run of identical samples starts again, from this poll's sample if it has one
            self.same_since, self.same_count = (t, 1) if self.last_t == t else (None, 0)

    def ranks_wait_on_host(self, t):
        """The latest stack sample, recent, has every rank in a host or collective wait."""
        if self._last is None or self.last_t is None or t - self.last_t > self.settings.signal_stale_s:
            return False
        depth = self.settings.stack_collective_depth
        return all(frames and host_wait_frame(frames, depth) for frames in self._last.values())
