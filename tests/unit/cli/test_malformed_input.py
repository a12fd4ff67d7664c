"""`sglang-ops replay` and `report` on malformed input: one line on stderr naming the
problem, exit status 2, never a traceback; long lines are refused in bounded memory."""
import copy
import json
import os
import subprocess
import sys

import pytest

from sglang_ops_cli.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BIN = os.path.join(ROOT, "bin", "sglang-ops")
TRACE = os.path.join(ROOT, "tests", "traces", "stall_host_ram_reclaim_futex_stacks.jsonl")
HEADER = '{"format": "sglang-trace/1", "name": "x", "unit": "u", "poll_s": 5.0}\n'


def trace_lines():
    with open(TRACE, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def one_line_error(capsys, code, *words):
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for word in words:
        assert word in err, err
    return err


MALFORMED_TRACES = [
    # (name, bytes, what the one line says)
    ("binary", b"\x7fELF\x02\x01\x01\x00\x00\x00" + os.urandom(64), "binary data"),
    ("latin1", (HEADER + '{"t": 0, "log": [{"msg": "caf\xe9"}]}\n').encode("latin-1"), ":2: not UTF-8 text (byte 0xe9"),
    ("nan", (HEADER + '{"t": NaN}\n').encode(), "NaN is not a JSON number"),
    ("overflow", (HEADER + '{"t": 1e400}\n').encode(), "out of range for a number"),
    ("deep", (HEADER + "[" * 200000 + "]" * 200000 + "\n").encode(), "nested too deeply"),
    ("header_list", b"[1, 2]\n", ":1: header must be a JSON object"),
    ("t_text", (HEADER + '{"t": "soon"}\n').encode(), ":2: observation needs a numeric t"),
    ("gpus_text", (HEADER + '{"t": 0, "gpus": "eight"}\n').encode(), "gpus must be a list"),
    ("empty", b"", "empty file"),
]


@pytest.mark.parametrize("name, data, words", MALFORMED_TRACES, ids=[m[0] for m in MALFORMED_TRACES])
@pytest.mark.parametrize("command", ["replay", "report"])
def test_malformed_trace_is_one_line(tmp_path, capsys, command, name, data, words):
    path = tmp_path / ("%s.jsonl" % name)
    path.write_bytes(data)
    argv = [command, str(path)] + (["-o", str(tmp_path / "out")] if command == "report" else [])
    one_line_error(capsys, main(argv), words)


def test_a_huge_line_is_refused_without_reading_it_into_memory(tmp_path):
    # A 4 GiB one-line file (sparse: no disk used) under a 1 GiB address-space limit:
    # reading the line whole would fail with MemoryError; the bounded reader names it.
    path = tmp_path / "huge.jsonl"
    with open(path, "wb") as fh:
        fh.write(b'{"format": "sglang-trace/1", "name": "' + b"x" * 1024)
        fh.truncate(4 * 2**30)
    limit = ("import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30)); "
             "sys.argv = [%r, 'replay', %r]; runpy.run_path(%r, run_name='__main__')" % (BIN, str(path), BIN))
    run = subprocess.run([sys.executable, "-c", limit], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert ":1: line longer than 16 MiB" in run.stderr


def run_dir_with(tmp_path, run_json_bytes):
    run = tmp_path / "run"
    (run / "attempt-1").mkdir(parents=True)
    with open(TRACE, encoding="utf-8") as src:
        (run / "attempt-1" / "trace.jsonl").write_text(src.read())
    (run / "run.json").write_bytes(run_json_bytes)
    return run


GOOD_RUN = {"host": "h", "unit": "sglang-k26-ddtree", "outcome": "gave_up", "gave_up_because": "same failure twice",
            "preflight": {"gpu_holders": [], "nvidia_smi": True},
            "attempts": [{"n": 1, "trace": "attempt-1/trace.jsonl", "verdict": "stalled", "phase": "weight_load",
                          "reason_code": "stall_wait_stacks", "reason": "r", "t": 590.0, "action": "handed_over"}]}


def with_change(path, value):
    run = copy.deepcopy(GOOD_RUN)
    target = run
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return json.dumps(run).encode()


MALFORMED_RUNS = [
    ("not_json", b"{\"host\": ", "run.json: not JSON"),
    ("binary", b"\x00\x01\x02\xff", "run.json: not UTF-8 text"),
    ("latin1", '{"host": "caf\xe9"}'.encode("latin-1"), "run.json: not UTF-8 text (byte 0xe9"),
    ("list", b"[1, 2, 3]", "run.json: the file must be a JSON object"),
    ("nan", b'{"host": "h", "attempts": [{"n": 1, "t": NaN}]}', "NaN is not a JSON number"),
    ("attempts_text", with_change(["attempts"], "two"), "attempts must be a list"),
    ("attempt_list", with_change(["attempts", 0], [1]), "attempts[0] must be a JSON object"),
    ("t_text", with_change(["attempts", 0, "t"], "later"), "attempts[0].t must be a number"),
    ("trace_number", with_change(["attempts", 0, "trace"], 7), "attempts[0].trace must be text"),
    ("trace_outside", with_change(["attempts", 0, "trace"], "../../../etc/passwd"),
     "attempts[0].trace must be a path inside the run folder"),
    ("host_dict", with_change(["host"], {"a": 1}), "host must be text"),
    ("holders_text", with_change(["preflight", "gpu_holders"], "none"), "preflight.gpu_holders must be a list"),
    ("settings_list", with_change(["settings"], [1]), "settings must be a JSON object"),
]


@pytest.mark.parametrize("name, data, words", MALFORMED_RUNS, ids=[m[0] for m in MALFORMED_RUNS])
def test_malformed_run_json_is_one_line(tmp_path, capsys, name, data, words):
    run = run_dir_with(tmp_path, data)
    one_line_error(capsys, main(["report", str(run)]), words)


def test_the_well_formed_run_still_reports(tmp_path, capsys):
    run = run_dir_with(tmp_path, json.dumps(GOOD_RUN).encode())
    assert main(["report", str(run)]) == 0, capsys.readouterr().err


WRONG_VALUES = [[], {}, "x", -1, 10 ** 30, None, True]


def test_wrong_values_anywhere_in_observations_never_raise(tmp_path, capsys):
    # Every key of every kind of observation, and of its nested records, set to each
    # wrong value in turn: replay and report either work or say one line; neither raises.
    lines = trace_lines()
    header, observations = lines[0], lines[1:]
    samples = {}
    for obs in observations:
        for key, value in obs.items():
            samples.setdefault(key, (obs, value))
    cases = []
    for key, (obs, value) in samples.items():
        paths = [(key,)]
        if isinstance(value, dict):
            paths += [(key, sub) for sub in value]
        if isinstance(value, list) and value and isinstance(value[0], dict):
            paths += [(key, 0, sub) for sub in value[0]]
        for path in paths:
            for wrong in WRONG_VALUES:
                cases.append((observations.index(obs), path, wrong))
    assert len(cases) > 100
    path = tmp_path / "t.jsonl"
    failures = []
    for index, keys, wrong in cases:
        mutated = copy.deepcopy(observations)
        target = mutated[index]
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = wrong
        path.write_text("".join(json.dumps(o) + "\n" for o in [header] + mutated))
        for argv in (["replay", str(path)], ["report", str(path), "-o", str(tmp_path / "out")]):
            try:
                code = main(argv)
            except Exception as exc:  # what the test is about
                failures.append((argv[0], keys, wrong, repr(exc)))
                continue
            err = capsys.readouterr().err
            if code not in (0, 2) or len(err.strip().splitlines()) > 1:
                failures.append((argv[0], keys, wrong, code, err))
    assert failures == []

