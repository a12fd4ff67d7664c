"""How SGLang and systemd write what the watcher reads: the rank prefix of a log line,
the progress bars, the process titles, and the line journald writes when the main
process ends. Both log-string families (<= 0.5.16 and 0.5.23, sglang-facts.md).

What a line means (phase markers, fatal classes, heartbeats) is log_lines.py; this
module only knows the shapes. Pure functions over strings.
"""
import re

# "[2026-05-30 20:27:00 TP3] msg", "[2026-05-30 20:27:00.123 DP0 TP3 EP3] msg";
# lines of the main process carry no rank.
RANK_PREFIX = re.compile(r"^\[(?P<stamp>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)"
                         r"(?P<ranks>(?:\s+[DTPE]P\d+)*)\]\s?")
_TP = re.compile(r"TP(\d+)")


def split_prefix(msg):
    """(stamp, ranks, text) of one log line: ranks as printed ("DP0 TP3"), '' when none;
    ("", "", msg) for a line without the prefix."""
    m = RANK_PREFIX.match(msg)
    if not m:
        return "", "", msg
    return m.group("stamp"), " ".join(m.group("ranks").split()), msg[m.end():]


def tp_rank(ranks):
    """The TP rank number in a rank text ("DP0 TP3", "TP3", "scheduler_TP3"), else None."""
    m = _TP.search(ranks or "")
    return int(m.group(1)) if m else None


def strip_prefix(msg):
    """(text, TP rank or None) with the "[timestamp TPn]" prefix removed."""
    dummy_stamp, ranks, text = split_prefix(msg)
    return text, tp_rank(ranks)


# ---- the command line ------------------------------------------------------------------
def flag_value(argv, name, default):
    """The value of `--name VALUE` or `--name=VALUE` in an argv list, else default."""
    for i, arg in enumerate(argv):
        key, sep, value = arg.partition("=")
        if key == name:
            return value if sep else (argv[i + 1] if i + 1 < len(argv) else default)
    return default


# ---- the model ---------------------------------------------------------------------------
# SGLang prints its arguments at start-up: up to 0.5.16 "server_args=ServerArgs(model_path='/models/Kimi-K2.6',
# ...)", 0.5.23 "server_args={'model_path': '/models/Kimi-K2.6', ...}" (sglang-facts.md, log lines).
_MODEL_PATH = re.compile(r"""model_path(?:=|['"]\s*:\s*)['"]([^'"]+)['"]""")


def model_path_of(msg):
    """The model path of SGLang's server_args line, else None."""
    m = _MODEL_PATH.search(msg or "")
    return m.group(1) if m else None


# ---- progress bars ----------------------------------------------------------------------
WEIGHT_BARS = ("checkpoint shards", "loading shards")   # bar descriptions of the shard loader
BAR_PHASES = (("Capturing batches", "cuda_graph"), ("DeepGEMM", "jit_compile"))
# A shard bar frame as the journal keeps it: "<...checkpoint shards>:  45% Completed | 29/64 [..]"
SHARD_BAR = re.compile(r"(?:%s)\D*?(\d+)%%[^|]*\|\s*(\d+)/(\d+)" % "|".join(WEIGHT_BARS))


def bar_kind(desc):
    """"shards", "cuda_graph", "jit_compile" or None for a bar description."""
    low = desc.lower()
    if any(w in low for w in WEIGHT_BARS):
        return "shards"
    for prefix, phase in BAR_PHASES:
        if desc.startswith(prefix):
            return phase
    return None


# ---- process titles ---------------------------------------------------------------------
SERVER_TITLE_PREFIX = "sglang::"   # setproctitle of every SGLang child: sglang::scheduler_TP3, sglang::detokenizer
_SCHEDULER_TITLE = re.compile(r"sglang::scheduler_((?:[A-Z]P\d+_?)+)")
_RANK_ARG = re.compile(r"(?:--tp-rank|--rank|TP_RANK=)[ =]?(\d+)")


SCHEDULER_COMM = "sglang::schedul"   # a scheduler's title as the kernel keeps it: the 15-character comm


def is_rank_name(name):
    """A process name (its title, else its comm) of one of SGLang's ranks: a scheduler."""
    return bool(name) and (name.startswith(SCHEDULER_COMM) or rank_of(name) is not None)


def is_server_title(cmdline):
    """A process SGLang titled itself (any of its children)."""
    return (cmdline or "").strip().startswith(SERVER_TITLE_PREFIX)


def rank_of(title_or_cmdline):
    """'sglang::scheduler_TP3' -> 'TP3'; 'sglang::scheduler_DP0_TP3' -> 'DP0-TP3';
    '... --tp-rank 2' -> 'TP2'; else None."""
    text = title_or_cmdline or ""
    m = _SCHEDULER_TITLE.search(text)
    if m:
        return m.group(1).rstrip("_").replace("_", "-")
    m = _RANK_ARG.search(text)
    if m:
        return "TP%s" % m.group(1)
    return None


# ---- a child's death, as its launcher or the kernel tells it -------------------------------
# SGLang 0.5.23's SubprocessWatchdog: "Subprocess scheduler_0 (pid=4242) crashed with exit code -9.
# Triggering SIGQUIT for cleanup..."; its launcher's SIGCHLD handler: "Child process unexpectedly
# failed with exitcode=9. pid=4242"; the kernel (the journal's kernel transport): "Out of memory:
# Killed process 4242 (python3) total-vm:..." and "oom-kill:constraint=...,task=python3,pid=4242,uid=0".
_DEATH_LINES = (
    (re.compile(r"Subprocess (?P<name>\S+) \(pid=(?P<pid>\d+)\) crashed with exit code (?P<code>-?\d+)"), "exit code %(code)s"),
    (re.compile(r"Child process unexpectedly failed with exitcode=(?P<code>-?\d+)\. pid=(?P<pid>\d+)"), "exit status %(code)s"),
    (re.compile(r"Out of memory: Killed process (?P<pid>\d+) \((?P<name>[^)]*)\)"), "killed by the kernel's OOM killer"),
    (re.compile(r"oom-kill:.*\btask=(?P<name>[^,]*),pid=(?P<pid>\d+)"), "killed by the kernel's OOM killer"),
)


def child_death_line(text):
    """(pid, how it died) of a line saying a child process died, else None."""
    for pattern, how in _DEATH_LINES:
        m = pattern.search(text or "")
        if m:
            return int(m.group("pid")), how % m.groupdict()
    return None


# ---- systemd's lines about the unit -------------------------------------------------------
MAIN_EXITED_WORDS = "Main process exited"
MAIN_EXITED = re.compile(MAIN_EXITED_WORDS + r", code=(?P<code>\w+), status=(?P<status>[\w/]+)")
UNIT_DONE = re.compile(r"\.service: (Deactivated successfully|Failed with result|Scheduled restart job)")


def says_main_exited(text):
    """journald's record of the main process ending, in any wording systemd uses."""
    return MAIN_EXITED_WORDS in (text or "")


def exit_status(text):
    """"1/FAILURE", "0/SUCCESS", ... from "Main process exited, code=..., status=...", else None."""
    m = MAIN_EXITED.search(text or "")
    return m.group("status") if m else None
