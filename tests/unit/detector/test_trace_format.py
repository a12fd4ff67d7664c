import json

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import TraceFormatError, read_trace

HEADER = {"format": "sglang-trace/1", "name": "x", "unit": "u", "poll_s": 10.0, "gpus": 8}


def _write(tmp_path, lines):
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join(l if isinstance(l, str) else json.dumps(l) for l in lines) + "\n")
    return str(p)


def test_a_good_trace_gives_header_and_observations(tmp_path):
    header, obs = read_trace(_write(tmp_path, [HEADER, {"t": 10.0}, {"t": 20.0, "log": []}]))
    assert header["name"] == "x" and [o["t"] for o in obs] == [10.0, 20.0]


@pytest.mark.parametrize("lines, line_no, words", [
    ([], 1, "no sglang-trace/1 header"),
    ([{"format": "other/1"}], 1, "not a sglang-trace/1 trace"),
    ([HEADER, "{not json"], 2, "not valid JSON"),
    ([HEADER, {"t": 20.0}, {"t": 10.0}], 3, "t goes backwards"),
    ([HEADER, {"log": []}], 2, "numeric t"),
    ([HEADER, {"t": 1.0, "gpus": {"index": 0}}], 2, "gpus must be a list"),
    ([HEADER, {"t": 1.0, "procs": {"cpu_s": "lots"}}], 2, "procs.cpu_s"),
    ([HEADER, {"t": 1.0, "log": [{"t": 1.0}]}], 2, "msg"),
    ([dict(HEADER, expect={"outcome": "stalled"})], 1, "onset_t"),
])
def test_malformed_traces_name_the_file_and_line(tmp_path, lines, line_no, words):
    path = _write(tmp_path, lines) if lines else str(tmp_path / "empty.jsonl")
    if not lines:
        open(path, "w").close()
    with pytest.raises(TraceFormatError) as e:
        read_trace(path)
    assert e.value.line_no == line_no
    assert str(e.value).startswith("%s:%d: " % (path, line_no)) and words in str(e.value)
