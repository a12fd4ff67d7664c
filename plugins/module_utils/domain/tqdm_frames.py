"""Decode tqdm progress bars out of journal records.

tqdm rewrites its line with carriage returns; journald keeps a whole bar as one record
(shown as "[N blob data]") whose frames are separated by `\r`. The last non-empty frame
is the bar's final state. With `\r` turned into newlines upstream, every frame is its
own record; both shapes decode the same way.
"""
import re
from dataclasses import dataclass

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import sglang_dialect

# "<desc>:  45%|####| 29/64 [..]" and SGLang's "<desc>:  45% Completed | 29/64 [..]"
_BAR = re.compile(
    r"^(?P<desc>[^\r\n]*?):?\s*(?P<pct>\d{1,3})%[^|\n]*\|[^|\n]*?\|?\s*"
    r"(?P<n>\d+(?:\.\d+)?)(?P<nu>[kMGTP]?)/(?P<total>\d+(?:\.\d+)?|\?)(?P<tu>[kMGTP]?)"
)
_SCALE = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


@dataclass(frozen=True)
class BarFrame:
    desc: str        # bar description, rank prefix removed ("Loading safetensors checkpoint shards")
    n: float         # items done
    total: float     # items in all (None when tqdm did not know)
    pct: int

    @property
    def done(self):
        return self.total is not None and self.n >= self.total


def frames(msg):
    """The non-empty frames of one record, oldest first."""
    return [f for f in re.split(r"[\r\n]", msg) if f.strip()]


def parse_frame(text):
    """A BarFrame for a tqdm-looking frame, else None."""
    dummy_stamp, dummy_ranks, text = sglang_dialect.split_prefix(text.strip())
    m = _BAR.match(text)
    if not m:
        return None
    desc = m.group("desc").strip().rstrip(":").strip()
    total = None if m.group("total") == "?" else float(m.group("total")) * _SCALE[m.group("tu")]
    return BarFrame(desc=desc, n=float(m.group("n")) * _SCALE[m.group("nu")], total=total, pct=int(m.group("pct")))


def last_bar(msg):
    """The final state of the last bar in a record (blob or single frame), else None."""
    for text in reversed(frames(msg)):
        frame = parse_frame(text)
        if frame is not None:
            return frame
    return None
