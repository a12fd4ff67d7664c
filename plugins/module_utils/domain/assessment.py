"""The detector's answer to one observation: the verdict, its reason and the evidence behind it."""
from dataclasses import dataclass, field

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.failure_classes import FINAL_VERDICTS


@dataclass
class Assessment:
    t: float
    phase: str
    verdict: str
    reason_code: str
    reason: str
    evidence: dict = field(default_factory=dict)
    progress: dict = field(default_factory=dict)
    want_stacks: bool = False

    @property
    def final(self):
        return self.verdict in FINAL_VERDICTS

    def to_dict(self):
        return {"t": self.t, "phase": self.phase, "verdict": self.verdict, "reason_code": self.reason_code,
                "reason": self.reason, "evidence": self.evidence, "progress": self.progress,
                "want_stacks": self.want_stacks, "final": self.final}
