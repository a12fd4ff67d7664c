"""Replaying traces and their perturbed variants through a replay command, judged."""
import concurrent.futures
import dataclasses
import os
import random

from bench.scoring import perturbations, traces
from bench.scoring.judge import judge
from bench.scoring.label import Label
from bench.scoring.replay_command import run_replay

AS_RECORDED = "as_recorded"


@dataclasses.dataclass(frozen=True)
class Run:
    trace: str            # the recorded trace's name (header name)
    perturbation: str     # AS_RECORDED or a name of perturbations.PERTURBATIONS
    path: str             # the file replayed
    header: dict
    observations: list

    def label(self):
        return Label.of(self.header, self.observations)


@dataclasses.dataclass(frozen=True)
class Outcome:
    run: Run
    result: dict          # the replay contract's verdict dict
    judgement: object     # judge.Judgement
    wall_s: float


def recorded_runs(paths):
    """One Run per labelled trace file of `paths` (folders or files); unlabelled traces
    are left out."""
    out = []
    for path in traces.trace_paths(paths):
        header, observations = traces.read_trace(path)
        if header.get("expect"):
            out.append(Run(header.get("name") or os.path.basename(path), AS_RECORDED, os.path.abspath(path),
                           header, observations))
    return out


def variant_runs(recorded, names, seed, folder):
    """(runs, refused): each recorded run's variant under each perturbation of `names`,
    written to `folder` and read back through the format check; refused lists
    (trace, perturbation, problem) for a variant the check refused."""
    runs, refused = [], []
    for run in recorded:
        stem = os.path.splitext(os.path.basename(run.path))[0]
        for name in names:
            rng = random.Random(perturbations.seed_of(seed, name, run.trace))
            header, observations = perturbations.PERTURBATIONS[name](run.header, run.observations, rng)
            path = traces.write_trace(os.path.join(folder, "%s__%s.jsonl" % (stem, name)), header, observations)
            try:
                header, observations = traces.read_trace(path)
            except traces.TraceFormatError as exc:
                refused.append((run.trace, name, str(exc)))
                continue
            runs.append(Run(run.trace, name, path, header, observations))
    return runs, refused


def replay_runs(runs, cmd, cwd=".", jobs=1):
    """The Outcome of every run, in the order of `runs`."""
    def one(run):
        result, wall_s = run_replay(cmd, run.path, cwd)
        end_t = run.observations[-1]["t"] if run.observations else None
        return Outcome(run, result, judge(run.label(), result, end_t), wall_s)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, runs))
