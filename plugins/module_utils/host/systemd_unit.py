"""A unit's state from one `systemctl show` call (parsing pure, IO at the edge)."""
import re
from dataclasses import dataclass

from ansible_collections.sglang_ops.serving.plugins.module_utils.host.bounded_run import (
    bounded_run, find_executable)

PROPERTIES = ("ActiveState", "SubState", "MainPID", "NRestarts", "ExecMainStatus", "Result",
              "ControlGroup", "LoadState", "InactiveExitTimestamp", "EnvironmentFiles", "ExecStart",
              "DropInPaths")
_VENV_PYTHON = re.compile(r"(/[^\s;'\"]+?)/bin/python[0-9.]*\b")
# The unit's supervisor (roles/sglang_service) as named in ExecStart; the server's command
# follows its `--`.
SUPERVISOR_MARK = "sglang-supervisor"


UNIT_NAME = re.compile(r"[A-Za-z0-9@_.:\\-]+\Z")


def check_unit_name(unit):
    """The name itself; ValueError when it is not a valid systemd unit name."""
    if not UNIT_NAME.match(unit or ""):
        raise ValueError("unit %r is not a valid systemd unit name" % unit)
    return unit


def service_name(unit):
    """'sglang-k26-ddtree' -> 'sglang-k26-ddtree.service'; a name with a suffix stays."""
    return unit if "." in unit else unit + ".service"


# On-call's hold of a unit (docs/runbook.md#stop-the-automation): a runtime drop-in whose
# condition is false while the drop-in itself exists, so systemd starts the unit for nobody
# (its own restarts, a converge, a restart run, a hand-typed start) and a skipped start is
# neither a failure nor a step towards the start limit; Restart=no leaves a start the
# supervisor stops failed, so the OnFailure= handler (services/unit_failed.py) ends it in the
# metrics without paging. `systemctl mask --runtime` cannot hold a unit in /etc/systemd/system
# (systemd#10583).
HOLD_DROPIN = "sglang-ops-hold.conf"


def hold_path(unit):
    return "/run/systemd/system/%s.d/%s" % (service_name(check_unit_name(unit)), HOLD_DROPIN)


def hold_text(unit):
    """The drop-in's content (docs/runbook.md writes the same two lines)."""
    return "[Unit]\nConditionPathExists=!%s\n[Service]\nRestart=no\n" % hold_path(unit)


@dataclass
class UnitState:
    active: str
    sub: str
    main_pid: object      # int, None when systemd reports 0 (no main process)
    restarts: object      # int or None (older systemd has no NRestarts)
    exec_main_status: object
    result: str
    control_group: str
    load_state: str
    inactive_exit_epoch_s: object  # float or None
    environment_files: list
    exec_start: str = ""
    drop_in_paths: list = None

    @property
    def installed(self):
        return self.load_state not in ("", "not-found")

    @property
    def held(self):
        """The hold drop-in systemd has loaded (see HOLD_DROPIN), or None."""
        return next((p for p in self.drop_in_paths or () if p.rsplit("/", 1)[-1] == HOLD_DROPIN), None)

    def to_obs(self):
        return {"active": self.active, "sub": self.sub, "main_pid": self.main_pid,
                "restarts": self.restarts, "exec_main_status": self.exec_main_status,
                "result": self.result}

    def to_result(self):
        """The probe's RV(unit_state): what the restart reads of the unit."""
        return {"installed": self.installed, "load_state": self.load_state, "active": self.active,
                "sub": self.sub, "main_pid": self.main_pid, "result": self.result,
                "exec_start": self.exec_start, "venv": venv_prefix(self.exec_start), "held": self.held}


def is_supervised(exec_start):
    """Whether a unit's ExecStart (the probe's unit_state.exec_start) runs the supervisor."""
    return SUPERVISOR_MARK in (exec_start or "")


def venv_prefix(exec_start):
    """The venv the unit runs Python from, read off ExecStart (also inside `bash -c '...'`,
    and after the supervisor's `--`, where the server's command begins)."""
    exec_start = exec_start or ""
    if is_supervised(exec_start) and " -- " in exec_start:
        exec_start = exec_start.split(" -- ", 1)[1]
    m = _VENV_PYTHON.search(exec_start)
    return m.group(1) if m else None


def _int_or_none(v):
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _timestamp(v):
    """'@1764446400' (--timestamp=unix) -> float; anything else -> None."""
    if v and v.startswith("@"):
        try:
            return float(v[1:])
        except ValueError:
            return None
    return None


def _env_files(v):
    """'/etc/sglang/x.env (ignore_errors=no) -/etc/y.env (...)' -> paths."""
    files = []
    for part in (v or "").split(")"):
        path = part.strip().split(" (")[0].strip()
        if path:
            files.append(path.lstrip("-"))
    return files


def parse_properties(text):
    """`systemctl show` output (KEY=VALUE lines) as a dict. systemctl ends each property
    with \\n and nothing else: a value may hold any other line break (a served model name
    with U+2028 in ExecStart), which str.splitlines() would take for the start of a
    property of its own (a forged MainPID=, Result=)."""
    props = {}
    for line in text.split("\n"):
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props


def parse_show(text):
    props = parse_properties(text)
    main_pid = _int_or_none(props.get("MainPID"))
    return UnitState(
        active=props.get("ActiveState", ""), sub=props.get("SubState", ""),
        main_pid=main_pid if main_pid else None,
        restarts=_int_or_none(props.get("NRestarts")),
        exec_main_status=_int_or_none(props.get("ExecMainStatus")),
        result=props.get("Result", ""), control_group=props.get("ControlGroup", ""),
        load_state=props.get("LoadState", ""),
        inactive_exit_epoch_s=_timestamp(props.get("InactiveExitTimestamp")),
        environment_files=_env_files(props.get("EnvironmentFiles")),
        exec_start=props.get("ExecStart", ""),
        drop_in_paths=(props.get("DropInPaths") or "").split())


def show_unit(unit, timeout_s=5.0):
    """(UnitState, None) or (None, reason); a unit that is not installed gives a state
    with load_state not-found."""
    exe = find_executable("systemctl")
    if exe is None:
        return None, "systemctl not found (no systemd on this host)"
    base = [exe, "show", "--no-pager", "-p", ",".join(PROPERTIES), unit]
    res = bounded_run(base[:2] + ["--timestamp=unix"] + base[2:], timeout_s)
    if not res.ok and not res.timed_out:
        res = bounded_run(base, timeout_s)  # systemd < 248 has no --timestamp=unix
    if res.timed_out:
        return None, "systemctl show timed out"
    if not res.ok:
        return None, "systemctl show exited %s: %s" % (res.rc, res.stderr.strip()[:200])
    return parse_show(res.stdout), None


def read_unit(unit, timeout_s=5.0):
    """(UnitState, None) or (None, reason); a unit that is not installed is a reason."""
    state, why = show_unit(unit, timeout_s)
    if state is not None and not state.installed:
        return None, "unit %s not found" % unit
    return state, why
