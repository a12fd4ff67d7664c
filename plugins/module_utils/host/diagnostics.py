"""The diagnostics bundle of a failed start, read on the host: the unit's status, its
journal since the start, nvidia-smi, the listening ports, the unit's processes and a
py-spy dump of each of its Python processes (one entry per rank). Every command runs
under a bound (bounded_run); one that cannot run says so in its own entry, the others
are still read. Secrets are redacted before anything leaves the host."""
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import cgroup, nvidia_smi, pyspy
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import sglang_dialect
from ansible_collections.sglang_ops.serving.plugins.module_utils.host.bounded_run import bounded_run, find_executable
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.redaction import redact
from ansible_collections.sglang_ops.serving.plugins.module_utils.host.systemd_unit import service_name

COMMAND_TIMEOUT_S = 60        # one diagnostic command
PYSPY_DUMP_TIMEOUT_S = 15     # one py-spy dump; the dumps run in parallel
JOURNAL_LINES = 5000          # the journal's last lines kept
STATUS_PROPERTIES = "ActiveState,SubState,Result,MainPID,NRestarts,ExecMainStatus,ExecMainCode,ControlGroup"


def _run(argv, timeout_s=COMMAND_TIMEOUT_S, ok_statuses=(0,)):
    """The command's output as a diagnostic text: stdout, then stderr and the exit status
    when they say something."""
    exe = find_executable(argv[0], nvidia_smi.EXTRA_DIRS if argv[0] == "nvidia-smi" else ())
    if exe is None:
        return "%s not found\n" % argv[0]
    res = bounded_run([exe] + argv[1:], timeout_s)
    text = res.stdout
    if res.stderr.strip():
        text += "\n# stderr\n" + res.stderr
    if res.timed_out:
        text += "\n# timed out after %d s\n" % timeout_s
    elif res.rc not in ok_statuses:
        text += "\n# exit status %s\n" % res.rc
    return text


def _unit_status(service):
    # systemctl status exits 3 for a stopped unit: that is an answer, not a failure
    return (_run(["systemctl", "status", "--no-pager", "--full", "--lines=0", "--", service], ok_statuses=(0, 3))
            + "\n" + _run(["systemctl", "show", "--property=" + STATUS_PROPERTIES, "--", service]))


def _journal(service, since_epoch_s):
    since = ["--since", "@%d" % int(since_epoch_s)] if since_epoch_s is not None else []
    text = _run(["journalctl", "-u", service] + since + ["--no-pager", "-a", "-o", "short-iso-precise"])
    return "\n".join(text.splitlines()[-JOURNAL_LINES:]) + "\n"


def _nvidia_smi():
    if find_executable("nvidia-smi", nvidia_smi.EXTRA_DIRS) is None:
        return "nvidia-smi not found\n"
    return (_run(["nvidia-smi"]) + "\n# compute apps (pid, gpu_uuid, used_memory MiB)\n"
            + _run(["nvidia-smi"] + nvidia_smi.APPS_QUERY))


def _ports():
    if find_executable("ss"):
        return _run(["ss", "-ltnp"])
    return _run(["netstat", "-ltnp"])


def _processes(procs):
    return "pid state command\n" + "".join("%(pid)d\t%(state)s\t%(cmdline)s\n" % p for p in procs)


def pyspy_label(pid, cmdline):
    """`rank<n>` for a scheduler rank, `pid<N>` for another Python process (the launcher,
    the detokenizer)."""
    rank = sglang_dialect.tp_rank(sglang_dialect.rank_of(cmdline)) if sglang_dialect.is_server_title(cmdline) else None
    return "rank%d" % rank if rank is not None else "pid%d" % pid


def _pyspy_dumps(procs, venv_bin):
    """{"py-spy-<label>": dump} of every Python process and SGLang-titled child, dumped in
    parallel so a wedged process costs one timeout, not one per rank."""
    targets = [p for p in procs if "python" in p["cmdline"] or sglang_dialect.is_server_title(p["cmdline"])]
    if not targets:
        return {"py-spy": "no Python process left in the unit\n"}
    exe = pyspy.find_pyspy(venv_bin)

    def dump(p):
        head = "PYSPY %d %s\n" % (p["pid"], p["cmdline"])
        if exe is None:
            return head + "py-spy not found (service venv bin, PATH)\n"
        # --nonblocking: reading a wedged process must not pause it (nor fail on a stopped one)
        res = bounded_run(pyspy.dump_argv(exe, p["pid"], stopped=True), PYSPY_DUMP_TIMEOUT_S)
        text = head + res.stdout + res.stderr
        if not res.ok:
            text += "(py-spy %s)\n" % ("timed out" if res.timed_out else "exited %s" % res.rc)
        return text

    with ThreadPoolExecutor(max_workers=min(16, len(targets))) as pool:
        dumps = list(pool.map(dump, targets))
    return {"py-spy-" + pyspy_label(p["pid"], p["cmdline"]): text for p, text in zip(targets, dumps)}


def collect(unit, since_epoch_s=None, venv_bin=None, proc_root="/proc"):
    """{name: text} of the bundle; each name becomes attempt-<n>/diagnostics/<name>.txt.
    The journal from since_epoch_s on (its last lines without it)."""
    service = service_name(unit)
    procs = cgroup.unit_processes(service, proc_root)
    bundle = {"unit-status": _unit_status(service), "journal": _journal(service, since_epoch_s),
              "nvidia-smi": _nvidia_smi(), "ports": _ports(), "processes": _processes(procs)}
    bundle.update(_pyspy_dumps(procs, venv_bin))
    return {name: redact(text) for name, text in bundle.items()}
