"""The restart action's side of rule 4 (module_utils/services/observe_only.py): the earlier starts
of the unit are the attempts of this run and of the host's earlier runs, as their run.json
files recorded them (artifacts/<host>/<stamp>/run.json), newest first."""
import json
import os

from ansible_collections.sglang_ops.serving.plugins.module_utils.services import observe_only

RECENT_RUNS = 5      # earlier runs read; rule 4 needs the last few starts only


def earlier_runs_attempts(host_dir, this_run_dir, limit=RECENT_RUNS):
    """Attempts of the host's earlier runs, newest first (this run's folder left out)."""
    try:
        names = sorted(os.listdir(host_dir), reverse=True)
    except OSError:
        return []
    out, runs = [], 0
    for name in names:
        folder = os.path.join(host_dir, name)
        if os.path.abspath(folder) == os.path.abspath(this_run_dir or ""):
            continue
        try:
            with open(os.path.join(folder, "run.json"), encoding="utf-8") as fh:
                run = json.load(fh)
        except (OSError, ValueError):
            continue
        attempts = run.get("attempts") if isinstance(run, dict) else None
        out.extend(a for a in reversed(attempts or []) if isinstance(a, dict))
        runs += 1
        if runs >= limit:
            break
    return out


def for_next_attempt(host_dir, this_run_dir, run_attempts, usual_ready_s=None, min_ceiling_s=None, ceiling_factor=None):
    """The ObserveOnly for the next attempt of this run, or None. run_attempts: this run's
    attempts so far, oldest first (run.json's list); the ceiling's bounds as the unit's
    supervisor has them (None: the defaults)."""
    starts = list(reversed(run_attempts)) + earlier_runs_attempts(host_dir, this_run_dir)
    return observe_only.from_starts(starts, usual_ready_s, min_ceiling_s, ceiling_factor)


def summary_words(attempts):
    """'attempt 3 ran observe-only: <why>; ceiling 30m00s' for each such attempt, joined; ''
    when none did."""
    return "; ".join("attempt %s ran %s" % (a.get("n"), (a.get("observe_only") or {}).get("words"))
                     for a in attempts if (a.get("observe_only") or {}).get("words"))
