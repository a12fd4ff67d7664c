"""Rule 2's GPU memory channel reads the memory of the start's own processes.

nvidia-smi's board reading (`gpus[].mem_used_mib`) counts every process on the board: a
neighbour's allocation or release is not this start's progress. Where the observation lists
the processes holding GPU memory (`gpu_procs`), the channel is the memory of the holders that
may be the unit's. A holder is another's when it was listed at a poll where every process of
the unit was known (the main PID and the py-spy samples' PIDs, as many as `procs.count`) and
it was not one of them; a holder of unknown ownership counts, since it may be the unit's.
Without `gpu_procs` (or with a holder on an unknown GPU) the board reading is all there is.

The same knowledge says which boards are shared: a GPU on which a holder known to be
another's is listed now. Utilisation and power are board totals with no split per process,
so on a shared GPU they are not the unit's readings (gpu_readings.py leaves them unread).
"""


def _pids_known_now(obs):
    """PIDs the observation says are the unit's live processes."""
    pids = set()
    unit = obs.get("unit")
    if isinstance(unit, dict) and isinstance(unit.get("main_pid"), int) and unit["main_pid"] > 0:
        pids.add(unit["main_pid"])
    for sample in obs.get("stacks") or ():
        if isinstance(sample, dict) and isinstance(sample.get("pid"), int):
            pids.add(sample["pid"])
    return pids


class UnitGpuMemory:
    """The PIDs known to be another's, learned over the watch."""

    def __init__(self):
        self.others = set()
        self._shared = frozenset()

    def shared_gpus(self, obs):
        """The GPU indexes another process holds beside the unit in `obs` (read by per_gpu(obs)
        first: it learns who the others are); empty without `gpu_procs`."""
        return self._shared if isinstance(obs.get("gpu_procs"), list) else frozenset()

    def per_gpu(self, obs):
        """{gpu index: MiB held by holders that may be the unit's}, or None where only the
        board reading can be used."""
        holders = obs.get("gpu_procs")
        if not isinstance(holders, list):
            self._shared = frozenset()
            return None
        holders = [p for p in holders if isinstance(p, dict) and isinstance(p.get("pid"), int)]
        known = _pids_known_now(obs)
        procs = obs.get("procs")
        count = procs.get("count") if isinstance(procs, dict) else None
        if isinstance(count, int) and count > 0 and len(known) >= count:
            self.others.update(p["pid"] for p in holders if p["pid"] not in known)
        self._shared = frozenset(p.get("gpu") for p in holders if p["pid"] in self.others)
        mem = {}
        for p in holders:
            if p["pid"] in self.others:
                continue
            used = p.get("mem_mib")
            if not isinstance(p.get("gpu"), int) or not isinstance(used, (int, float)):
                return None
            mem[p["gpu"]] = mem.get(p["gpu"], 0) + used
        return mem
