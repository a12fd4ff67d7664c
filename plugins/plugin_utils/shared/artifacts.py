"""The artifacts folder of one restart run, on the controller.

artifacts/<inventory_hostname>/<UTC yyyymmddTHHMMSSZ>/
  run.json, attempt-<n>/trace.jsonl, attempt-<n>/diagnostics/<name>.txt
(docs/architecture.md). Every text written here passes through redact_secrets first.
"""
import json
import os
import re
import time

from ansible_collections.sglang_ops.serving.plugins.module_utils.records.redaction import redact


def redact_secrets(text):
    """The text with API keys replaced, by the project's one set of patterns."""
    return redact(text)


def utc_stamp(epoch_s):
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(epoch_s))


def iso_utc(epoch_s):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_s))


def unused_stamp_name(base, epoch_s):
    """The UTC stamp of epoch_s as a folder name not yet in base (two runs in the same
    second keep both: <stamp>-2, ...)."""
    stamp = name = utc_stamp(epoch_s)
    n = 1
    while os.path.exists(os.path.join(base, name)):
        n += 1
        name = "%s-%d" % (stamp, n)
    return name


_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_name(name):
    """A file-name-safe form of a host or diagnostic name (no path separators)."""
    cleaned = _SAFE_NAME.sub("_", str(name)).strip("._")
    return cleaned or "unnamed"


class RunArtifacts:
    """Paths and writers for one run; relative paths are relative to the run folder."""

    def __init__(self, root, host, started_epoch_s):
        base = os.path.join(os.path.abspath(root), safe_name(host))
        path = os.path.join(base, unused_stamp_name(base, started_epoch_s))
        os.makedirs(path)
        self.path = path

    @classmethod
    def at(cls, path):
        """The run folder at exactly `path` (one node's folder of a server's run), made now."""
        run = cls.__new__(cls)
        os.makedirs(path)
        run.path = os.path.abspath(path)
        return run

    def attempt_dir(self, n):
        return "attempt-%d" % n

    def trace_relpath(self, n):
        return os.path.join(self.attempt_dir(n), "trace.jsonl")

    def diagnostics_relpath(self, n):
        return os.path.join(self.attempt_dir(n), "diagnostics")

    def abspath(self, relpath):
        return os.path.join(self.path, relpath)

    def write_diagnostic(self, n, name, text):
        """Write attempt n's diagnostic `name` (e.g. "journal" → journal.txt); returns its relpath."""
        rel = os.path.join(self.diagnostics_relpath(n), safe_name(name) + ".txt")
        full = self.abspath(rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as fh:
            fh.write(redact_secrets(text))
        return rel

    def write_run(self, run):
        """Write run.json atomically (a reader never sees half a file); returns its path."""
        full = self.abspath("run.json")
        tmp = full + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(run, fh, indent=2, sort_keys=False)
            fh.write("\n")
        os.replace(tmp, full)
        return full


def newest_report(root, host):
    """(path of report.md, run folder) of the newest run of host under root (artifacts/) that
    has an incident report, or None. Run folders are named by their UTC time, so the newest
    sorts last."""
    base = os.path.join(root, safe_name(host))
    try:
        runs = sorted(os.listdir(base), reverse=True)
    except OSError:
        return None
    for name in runs:
        report = os.path.join(base, name, "report.md")
        if os.path.isfile(report):
            return report, os.path.join(base, name)
    return None


def default_artifacts_root(playbook_dir):
    """artifacts/ beside playbooks/ (the repository root), or beside a root-level playbook.
    A playbook of an installed collection (ansible-playbook sglang_ops.serving.restart)
    writes to artifacts/ in the current directory, never into the collection's folder."""
    base = os.path.abspath(playbook_dir or os.getcwd())
    if os.path.basename(base) == "playbooks":
        base = os.path.dirname(base)
        if os.path.basename(os.path.dirname(os.path.dirname(base))) == "ansible_collections":
            base = os.getcwd()
    return os.path.join(base, "artifacts")


def run_artifacts_root(host, run_dir, default):
    """Where the restart action kept a host's runs, from the run folder a playbook run just
    wrote (<root>/<host>/<stamp>, so sglang_restart_artifacts_dir from the inventory or -e
    counts); `default` when the run wrote none there."""
    if run_dir and os.path.basename(os.path.dirname(run_dir)) == host:
        return os.path.dirname(os.path.dirname(run_dir))
    return default
