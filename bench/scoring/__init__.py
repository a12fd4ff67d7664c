"""Scoring a stall detector on labelled sglang-trace/1 files (docs/trace-format.md).

label: what a trace's header expects and the time budgets that follow from it;
judge: one verdict against its label; replay_command: a replay command's verdict;
perturbations: variants of a trace that a robust detector must judge the same way;
baselines: the reference watchers the detector is compared with (`make bench`).
The command-line tools are bench/score.py, bench/perturb.py and bench/baseline.py.
"""
