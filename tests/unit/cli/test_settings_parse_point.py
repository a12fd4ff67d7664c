"""The checkout's tools (the CLI's replay, bench) turn detector overrides into settings with
detector_settings.from_overrides too (tests/unit/test_layout.py checks plugins/)."""
import re
from pathlib import Path

from ansible_collections.sglang_ops.serving.tests.unit.test_layout import PARSED_ELSEWHERE

ROOT = Path(__file__).resolve().parents[3]


def test_the_cli_and_bench_parse_detector_overrides_with_from_overrides():
    rx = re.compile(PARSED_ELSEWHERE)
    files = [p for folder in ("sglang_ops_cli", "bench") for p in (ROOT / folder).rglob("*.py")]
    assert files
    assert [str(p.relative_to(ROOT)) for p in files if rx.search(p.read_text(encoding="utf-8"))] == []
    assert "from_overrides(" in (ROOT / "sglang_ops_cli" / "commands" / "replay.py").read_text(encoding="utf-8")


def test_the_benchmarks_replay_through_plugins_not_the_cli():
    bench = sorted((ROOT / "bench").rglob("*.py"))
    assert bench
    from_cli = [str(p.relative_to(ROOT)) for p in bench
                if re.search(r"^\s*(from|import)\s+sglang_ops_cli\b", p.read_text(encoding="utf-8"), re.M)]
    assert from_cli == []
    assert "plugin_utils.shared.replay import" in (ROOT / "sglang_ops_cli" / "commands" / "replay.py").read_text(encoding="utf-8")
