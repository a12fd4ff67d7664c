"""The runbook's command that reads an observe-only start's held verdict (stall_observe_ceiling,
Confirm) prints it: run with jq on the trace of a start the real detector held to its ceiling."""
import json
import os
import re
import shutil
import subprocess

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.observe_only_decision import ObserveOnly
from ansible_collections.sglang_ops.serving.tests.unit.detector.conftest import Start

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TRACE_ON_HOST = "/var/lib/sglang-ops/starts/current/trace.jsonl"


def _held_verdict_command():
    with open(os.path.join(ROOT, "docs", "runbook.md"), encoding="utf-8") as fh:
        text = fh.read()
    section = text[text.index('<a id="stall_observe_ceiling"></a>'):]
    section = section[:section.index("### Next steps")]
    lines = [line.split("  #")[0].strip() for block in re.findall(r"```sh\n(.*?)```", section, re.S)
             for line in block.splitlines() if "held_verdict" in line]
    assert len(lines) == 1, lines
    return lines[0]


def test_the_documented_jq_prints_the_held_verdict_of_the_trace(tmp_path):
    if shutil.which("jq") is None:
        pytest.skip("jq is not installed")
    s = Start(observe_only=ObserveOnly(600.0, "twice the same", "stalled", "stall_idle", "post_load"))
    s.loaded()
    trace = tmp_path / "trace.jsonl"
    with open(trace, "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"format": "sglang-trace/1", "unit": "sglang-k26-ddtree"}) + "\n")
        for dummy in range(80):
            o = s.obs(cpu_pct=3)
            a = s.det.observe(o)
            fh.write(json.dumps(dict(o, assessment=a.to_dict())) + "\n")
            if a.final:
                break
    assert a.reason_code == "stall_observe_ceiling"
    command = _held_verdict_command()
    assert TRACE_ON_HOST in command
    run = subprocess.run(["sh", "-c", command.replace(TRACE_ON_HOST, str(trace))], capture_output=True, text=True,
                         check=False)
    assert run.returncode == 0, run.stderr
    held = json.loads(run.stdout)
    assert (held["verdict"], held["reason_code"], held["phase"]) == ("stalled", "stall_idle", "post_load")
