"""Rule 4 of the detector, "never keep a server down by our own verdict": the memory of a
unit's earlier starts decides whether the next start runs observe-only. Pure, no I/O.

When the two newest finished starts that count ended the same way (the same verdict family
in the same phase), a restart did not help: the next start is watched but not stopped
(Detector(settings, observe_only=...)), up to a hard ceiling.

What counts, newest first (start records of plugins/module_utils/records/start_records.py):
- a start that ended `ready` breaks the chain: nothing is held against the next one;
- starts ended by a dead process (`process_exited`, or any `failed` the process exiting
  decided: their record's rule says so) and starts the operator ended (`stopped`,
  `interrupted`, a `running` record that is not in progress) are skipped: the detector's
  own judgement did not end them;
- a `stalled` start's family is "stalled", whatever its signature (idle, parked, spinning:
  py-spy or GPU telemetry being there or not changes the code, not what happened); a
  `failed` start's family is its reason code (a line confirmed by the start freezing).
"""
from dataclasses import dataclass

DEAD_CODES = ("process_exited",)
OPERATOR_VERDICTS = ("stopped", "interrupted", "running")
DEAD_RULE_PREFIXES = ("dead process", "rule 1: lethal line confirmed by the process exiting")


@dataclass(frozen=True)
class ObserveOnly:
    ceiling_s: float   # seconds since the start after which the start ends stall_observe_ceiling
    why: str           # words for the operator
    verdict: str       # the repeated verdict, its reason code and phase
    reason_code: str
    phase: str


# The ceiling of an observe-only start: the larger of MIN_CEILING_S and CEILING_FACTOR times the
# host's usual time to ready (the role's sglang_service_observe_only_* defaults are these).
MIN_CEILING_S = 1800.0
CEILING_FACTOR = 3.0


def observe_only_from_starts(starts, usual_ready_s=None, min_ceiling_s=MIN_CEILING_S, ceiling_factor=CEILING_FACTOR):
    """ObserveOnly when the two newest counting starts in `starts` (newest first) ended with the
    same verdict family in the same phase; None otherwise."""
    counted = []
    for record in starts or ():
        if not isinstance(record, dict):
            raise ValueError("a start record must be a mapping, got %s" % type(record).__name__)
        verdict = record.get("verdict")
        if verdict == "ready":
            break
        if not _counts(record):
            continue
        counted.append(record)
        if len(counted) == 2:
            break
    if len(counted) < 2:
        return None
    newest, before = counted
    if _family(newest) != _family(before) or newest.get("phase") != before.get("phase"):
        return None
    ceiling_s = max(float(min_ceiling_s), float(ceiling_factor) * float(usual_ready_s or 0.0))
    why = "the last 2 starts ended %s (%s) in %s" % (newest["verdict"], _codes(newest, before), newest.get("phase"))
    return ObserveOnly(ceiling_s, why, newest["verdict"], newest.get("reason_code"), newest.get("phase"))


def _counts(record):
    verdict, code = record.get("verdict"), record.get("reason_code")
    if verdict in OPERATOR_VERDICTS or verdict not in ("stalled", "failed"):
        return False
    if code in DEAD_CODES:
        return False
    rule = record.get("rule") or (record.get("evidence") or {}).get("rule") or ""
    return not (verdict == "failed" and rule.startswith(DEAD_RULE_PREFIXES))


def _family(record):
    return "stalled" if record["verdict"] == "stalled" else "failed:%s" % record.get("reason_code")


def _codes(newest, before):
    codes = [newest.get("reason_code"), before.get("reason_code")]
    return codes[0] if codes[0] == codes[1] else ", then ".join(reversed([c for c in codes if c]))
