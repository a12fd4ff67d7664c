"""The unit's log filter: \\r frames become journal lines as they come, the API key never passes."""
import os
import selectors
import subprocess

FILTER = os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "sglang_service", "files",
                      "sglang-log-filter")


def start_filter(api_key=""):
    env = dict(os.environ, SGLANG_API_KEY=api_key)
    return subprocess.Popen(["bash", FILTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)


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
    proc = start_filter()
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


def test_api_key_is_replaced_even_when_it_looks_like_a_pattern():
    key = "sk-a.*[b]$x"
    out = subprocess.run(["bash", FILTER], input=("server_args={'api_key': '%s'}\nlast line without newline %s" % (key, key)).encode(),
                         capture_output=True, env=dict(os.environ, SGLANG_API_KEY=key), check=True).stdout.decode()
    assert key not in out
    assert out.splitlines() == ["server_args={'api_key': '<api-key>'}", "last line without newline <api-key>"]


def test_without_a_key_lines_pass_unchanged():
    out = subprocess.run(["bash", FILTER], input=b"[TP0] Load weight begin.\n", capture_output=True,
                         env=dict(os.environ, SGLANG_API_KEY=""), check=True).stdout
    assert out == b"[TP0] Load weight begin.\n"
