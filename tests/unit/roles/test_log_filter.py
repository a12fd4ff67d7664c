"""The unit's log filter: \\r frames become journal lines as they come, and the API key
never passes, in any form SGLang can print it."""
import json
import os
import selectors
import subprocess
import sys

import pytest
import yaml

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import api_key_config

FILTER = os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "sglang_service", "files",
                      "sglang-log-filter")
HOSTILE_KEYS = [
    "sk-a.*[b]$x",
    "k$y with \"quotes\", 'single', \\ and `ticks` %n #no: comment ${HOME}",
    "it's",
    'say "hi"',
    "back\\slash\\",
    "  spaced  out  ",
]


def config_file(tmp_path, key):
    path = tmp_path / "unit.yaml"
    path.write_text("# SGLang --config\n" + api_key_config.render(key) + "\n")
    return str(path)


def run_filter(args, data):
    return subprocess.run([sys.executable, "-I", FILTER, *args], input=data, capture_output=True, check=False)


def read_lines_while_input_stays_open(proc, count, wait_s=10.0):
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    data = b""
    while data.count(b"\n") < count:
        if not sel.select(timeout=wait_s):
            break
        chunk = os.read(proc.stdout.fileno(), 4096)
        if not chunk:
            break
        data += chunk
    return data.decode().splitlines()


def test_each_tqdm_frame_reaches_the_journal_before_the_bar_ends():
    proc = subprocess.Popen([sys.executable, "-I", FILTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        proc.stdin.write(b"Loading shards:  25% | 1/4\rLoading shards:  50% | 2/4\r")
        proc.stdin.flush()
        proc.stdin.write(b"still loading\n")
        proc.stdin.flush()
        lines = read_lines_while_input_stays_open(proc, 3)
    finally:
        proc.kill()
        proc.wait()
    assert lines == ["Loading shards:  25% | 1/4", "Loading shards:  50% | 2/4", "still loading"]


@pytest.mark.parametrize("key", HOSTILE_KEYS)
def test_every_printed_form_of_the_key_is_blanked(tmp_path, key):
    printed = [
        "server_args=%r" % {"api_key": key, "port": 30001},             # 0.5.23
        "server_args=ServerArgs(api_key=%r, port=30001)" % key,         # 0.5.16
        "server_args=%s" % json.dumps({"api_key": key}),
        "launch_command=%r" % ["--api-key", key],
        "raw %s raw" % key,
    ]
    run = run_filter([config_file(tmp_path, key)], "\n".join(printed).encode())
    assert run.returncode == 0, run.stderr
    out = run.stdout.decode()
    assert len(out.splitlines()) == len(printed)
    for form in (key, repr(key)[1:-1], json.dumps(key)[1:-1]):
        assert form.strip() not in out, form
    assert out.count("<api-key>") == len(printed)


def test_the_filter_reads_the_key_as_sglang_reads_it(tmp_path):
    for key in HOSTILE_KEYS:
        path = config_file(tmp_path, key)
        assert yaml.safe_load(open(path, encoding="utf-8").read()) == {"api-key": key}
        assert api_key_config.read_api_key(path) == (key, None)
        run = run_filter([path], ("x%sx" % key).encode())
        assert run.stdout == b"x<api-key>x\n"


def test_a_last_line_without_newline_is_written_at_the_end(tmp_path):
    run = run_filter([config_file(tmp_path, "sk-secret-key")], b"first\nlast sk-secret-key")
    assert run.stdout == b"first\nlast <api-key>\n"


def test_without_a_key_lines_pass_unchanged():
    assert run_filter([], b"[TP0] Load weight begin.\n").stdout == b"[TP0] Load weight begin.\n"


def test_an_unreadable_key_file_withholds_the_output(tmp_path):
    run = run_filter([str(tmp_path / "absent.yaml")], b"server_args={'api_key': 'sk-secret-key'}\n")
    assert run.returncode == 1
    assert b"sk-secret-key" not in run.stdout
    assert b"cannot read the API key" in run.stdout
