"""Run one of the project's playbooks through ansible-runner and say how it went.

Everything Ansible prints (task banners, the restart action's live progress lines, which
reach ansible-runner as `verbose` events, the recap) is written to `out` as each event
arrives, so `bin/sglang-ops restart` shows the same live progress as ansible-playbook.
The outcome is reduced to an exit status the shell can act on (EXIT_* below).
"""
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Exit statuses of `bin/sglang-ops restart|status` (also listed in docs/architecture.md#cli).
EXIT_READY = 0          # every host ready (status) / restarted and ready (restart)
EXIT_FAILED = 1         # a host gave up, a task failed, or the playbook could not run
EXIT_USAGE = 2          # bad arguments, missing inventory, ansible-runner not installed
EXIT_NOT_READY = 3      # status only: reachable, but the service is not ready (yet) or out of the load balancer
EXIT_UNREACHABLE = 4    # at least one host could not be reached

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# States of a server in the load balancer (module sglang_lb_member) that take no new traffic.
OUT_OF_LB_STATES = ("drain", "maint")


@dataclass
class PlaybookOutcome:
    rc: int
    status: str                                   # ansible-runner's: successful, failed, ...
    unreachable: list = field(default_factory=list)
    failed: list = field(default_factory=list)
    verdicts: dict = field(default_factory=dict)  # host -> verdict reported by a task
    reports: dict = field(default_factory=dict)   # host -> incident report (report.md) or artifacts folder
    artifacts: dict = field(default_factory=dict)  # host -> the run's artifacts folder, where a task named one
    out_of_lb: dict = field(default_factory=dict)  # host -> (state, backend/server): drained or in maintenance

    def exit_code(self, need_ready_verdict=False):
        """Unreachable beats failed beats not-ready: the worst news decides."""
        if self.unreachable:
            return EXIT_UNREACHABLE
        if self.failed or self.rc != 0 or self.status not in ("successful",):
            return EXIT_FAILED
        if need_ready_verdict and (any(v != "ready" for v in self.verdicts.values()) or self.out_of_lb):
            return EXIT_NOT_READY
        return EXIT_READY


def find_verdict(result, depth=0):
    """The detector's verdict a task result carries. The restart action in check mode (the
    status playbook) reports outcome "observed" at the top and the detector's reading under
    `assessment`, so a nested assessment wins over a top-level `verdict`."""
    if not isinstance(result, dict) or depth > 2:
        return None
    for key in ("assessment", "status", "result"):
        found = find_verdict(result.get(key), depth + 1)
        if found:
            return found
    value = result.get("verdict")
    return value if isinstance(value, str) else None


def load_balancer_state(result):
    """(state, "backend/server") of the fact `sglang_lb_state` a task result sets
    (playbooks/status.yml), or None."""
    facts = result.get("ansible_facts") if isinstance(result, dict) else None
    found = facts.get("sglang_lb_state") if isinstance(facts, dict) else None
    if not isinstance(found, dict) or not isinstance(found.get("state"), str):
        return None
    return found["state"], str(found.get("where", "?"))


def report_location(result):
    """Where on-call should look for a host: the incident report's Markdown when the restart
    action wrote one, else its artifacts folder, else None."""
    if not isinstance(result, dict):
        return None
    report = result.get("report")
    if isinstance(report, dict) and isinstance(report.get("markdown"), str):
        return report["markdown"]
    if isinstance(report, str):
        return report
    artifacts = result.get("artifacts")
    return artifacts if isinstance(artifacts, str) else None


class EventPrinter:
    """ansible-runner event handler: print each event's text at once, record outcomes."""

    def __init__(self, out):
        self.out = out
        self.unreachable, self.failed, self.verdicts, self.reports, self.out_of_lb = [], [], {}, {}, {}
        self.artifacts = {}
        self.strip_colour = not (hasattr(out, "isatty") and out.isatty())

    def __call__(self, event):
        text = event.get("stdout") or ""
        if text:
            if self.strip_colour:
                text = _ANSI.sub("", text)
            self.out.write(text + "\n")
            self.out.flush()
        data = event.get("event_data") or {}
        host = data.get("host")
        kind = event.get("event")
        if kind == "runner_on_unreachable" and host:
            if host not in self.unreachable:
                self.unreachable.append(host)
            where = report_location(data.get("res"))
            if where:
                self.reports[host] = where
        elif kind == "runner_on_failed" and host and not data.get("ignore_errors"):
            if host not in self.failed:
                self.failed.append(host)
            where = report_location(data.get("res"))
            if where:
                self.reports[host] = where
        elif kind == "runner_on_ok" and host:
            res = data.get("res")
            if isinstance(res, dict) and isinstance(res.get("artifacts"), str):
                self.artifacts[host] = res["artifacts"]
            verdict = find_verdict(data.get("res"))
            if verdict:
                self.verdicts[host] = verdict
            in_lb = load_balancer_state(data.get("res"))
            if in_lb and in_lb[0] in OUT_OF_LB_STATES:
                self.out_of_lb[host] = in_lb
            elif in_lb:
                self.out_of_lb.pop(host, None)
        return True


def parse_extravars(items):
    """Extra vars from repeated -e, as ansible-playbook takes them: key=value, a JSON
    object ('{"sglang_restart_detector": {...}}'), or @file (YAML or JSON). Later items
    win. ValueError says which item is wrong."""
    out = {}
    for item in items or ():
        text = item.strip()
        if text.startswith("@"):
            out.update(_load_vars_file(text[1:]))
        elif text.startswith("{"):
            try:
                value = json.loads(text)
            except ValueError as exc:
                raise ValueError("-e %r is not a JSON object: %s" % (item, exc))
            if not isinstance(value, dict):
                raise ValueError("-e %r is not a JSON object" % item)
            out.update(value)
        else:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ValueError("-e expects key=value, a JSON object or @file, got %r" % item)
            out[key.strip()] = _scalar(value)
    return out


def _load_vars_file(path):
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            value = yaml.safe_load(fh)
    except OSError as exc:
        raise ValueError("-e @%s: %s" % (path, exc.strerror or exc))
    except yaml.YAMLError as exc:
        raise ValueError("-e @%s: not YAML/JSON: %s" % (path, exc))
    if not isinstance(value, dict):
        raise ValueError("-e @%s: expected a mapping of variables" % path)
    return value


def _scalar(text):
    low = text.lower()
    if low in ("true", "yes"):
        return True
    if low in ("false", "no"):
        return False
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?\d+\.\d*", text):
        return float(text)
    return text


def run_playbook(playbook, inventory=None, limit=None, extravars=None, out=None,
                 envvars=None, project_dir=ROOT):
    """Run `playbook` (absolute, or relative to project_dir) and return its outcome."""
    import ansible_runner

    out = out or sys.stdout
    env = {
        "ANSIBLE_CONFIG": os.environ.get("ANSIBLE_CONFIG") or os.path.join(project_dir, "ansible.cfg"),
        # the venv's ansible-playbook first, also when the CLI was started by absolute path
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
        "ANSIBLE_FORCE_COLOR": "false",
        "ANSIBLE_NOCOLOR": "true",
    }
    env.update(envvars or {})
    printer = EventPrinter(out)
    private = tempfile.mkdtemp(prefix="sglang-ops-runner-")
    # Ctrl-C asks ansible-runner to stop ansible-playbook instead of leaving it running.
    interrupted = []
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, lambda *_: interrupted.append(True))
    try:
        kwargs = dict(
            private_data_dir=private,
            project_dir=project_dir,
            playbook=playbook,
            envvars=env,
            extravars=extravars or {},
            event_handler=printer,
            quiet=True,
            suppress_env_files=True,
            cancel_callback=lambda: bool(interrupted),
        )
        if inventory:
            kwargs["inventory"] = os.path.abspath(inventory)
        if limit:
            kwargs["limit"] = limit
        result = ansible_runner.run(**kwargs)
        rc = result.rc if isinstance(result.rc, int) else 1
        return PlaybookOutcome(rc=rc, status=result.status or "unknown", unreachable=printer.unreachable,
                               failed=printer.failed, verdicts=printer.verdicts, reports=printer.reports,
                               out_of_lb=printer.out_of_lb, artifacts=printer.artifacts)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        shutil.rmtree(private, ignore_errors=True)
