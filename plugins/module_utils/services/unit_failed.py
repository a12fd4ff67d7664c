"""The OnFailure= handler of a supervised unit (roles/sglang_service: <unit>-needed-human.service,
`python3 -I sglang-unit-failed --settings FILE.json UNIT`): when systemd leaves the unit
failed for good, the start record and the metrics file say a human is needed.

systemd starts the handler when the unit enters the failed state. Two of those need a
human, and the supervisor can only record the first itself:

- start_limit: restartable failures came back StartLimitBurst times within
  StartLimitIntervalSec and systemd refused the next start (Result=start-limit-hit). The
  supervisor's last start ended expecting a restart (in the metrics: a restart counted,
  the start still "in progress"), and no start follows to correct that.
- no_restart: a start ended with a class a restart cannot help (its exit status is in
  RestartPreventExitStatus=); the supervisor already wrote gave_up in the metrics.

A unit on-call holds (its hold drop-in, host/systemd_unit.hold_path, sets Restart=no) fails
when its supervisor stops a start; that needs nobody: the handler ends the watched start in
the metrics (interrupted, no human needed) so no alert reads a start still in progress.

systemd 252 (Debian 12) keeps Result=exit-code when it refuses the restart ("Start request
repeated too quickly"), so a restartable result with no restart coming (the unit stays
failed, neither auto-restart nor activating, for RESTART_WAIT_S) is a start limit too. A
restart that comes (on systemd 254 and later the handler also runs on failures that systemd
then restarts) changes nothing. The result comes from $MONITOR_SERVICE_RESULT and
$MONITOR_EXIT_STATUS (systemd 251+), else from `systemctl show` of the unit. Standard
library only: this runs on the host, as the service user, in the handler's own sandbox.
"""
import os
import subprocess
import sys
import time

from ansible_collections.sglang_ops.serving.plugins.module_utils.records import start_records
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.inert_text import inert
from ansible_collections.sglang_ops.serving.plugins.module_utils.host.systemd_unit import hold_path
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.failure_classes import class_of_exit_code
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_metrics import (
    StartMetrics, file_name, write_textfile)
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.start_outlook import read_metrics_file, record_phases
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.supervisor_settings import SupervisorSettings

START_LIMIT_HIT = "start-limit-hit"
# How long a restartable failure may sit failed before a restart shows (auto-restart,
# activating): systemd moves a unit it restarts out of "failed" at once.
RESTART_WAIT_S = 5.0
RESTART_COMING = ("auto-restart",)
RUNNING_STATES = ("activating", "active", "reloading")
START_LIMIT = "start_limit"
NO_RESTART = "no_restart"
EXIT_USAGE, EXIT_SETTINGS = 2, 64


def needs_human(result, exit_status, restart_coming=True):
    """START_LIMIT, NO_RESTART, or None when systemd restarts the unit (or nothing failed).
    result: the unit's Result (start-limit-hit, exit-code, signal, ...); exit_status: the
    main process's exit status (an int, or None); restart_coming: whether systemd is
    restarting the unit (restart_coming())."""
    if result == START_LIMIT_HIT:
        return START_LIMIT
    if result == "exit-code" and exit_status is not None:
        cls = class_of_exit_code(exit_status)
        if cls is not None and not cls.restart_helps:
            return NO_RESTART
    if result and result != "success" and not restart_coming:
        return START_LIMIT
    return None


def restart_coming(unit, show=None, sleep=time.sleep, wait_s=RESTART_WAIT_S, step_s=0.5):
    """Whether systemd restarts the unit: its state shows a restart (auto-restart, or already
    activating or running again) within wait_s."""
    waited = 0.0
    while True:
        props = (show or _systemctl_show)(unit)
        if props.get("SubState") in RESTART_COMING or props.get("ActiveState") in RUNNING_STATES:
            return True
        if waited >= wait_s:
            return False
        sleep(step_s)
        waited += step_s


def words(why, unit, record):
    """The hand-over sentence of the start record (`status`, the report)."""
    last = "the last start: %s in %s (%s)" % (record.get("verdict"), record.get("phase"), record.get("reason_code"))
    if why == START_LIMIT:
        return ("%s hit its start limit (StartLimitBurst within StartLimitIntervalSec): systemd will not start it "
                "again until `systemctl reset-failed %s`; %s" % (unit, unit, last))
    return "a restart cannot help, systemd left %s failed; %s" % (unit, last)


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def unit_result(unit, environ, show=None):
    """(Result, exit status) of the unit that failed: systemd's MONITOR_* variables, else
    `systemctl show`. show(unit) -> {"Result": ..., "ExecMainStatus": ...} (tests)."""
    if environ.get("MONITOR_SERVICE_RESULT"):
        return environ["MONITOR_SERVICE_RESULT"], _int(environ.get("MONITOR_EXIT_STATUS"))
    props = (show or _systemctl_show)(unit)
    return props.get("Result") or None, _int(props.get("ExecMainStatus"))


def _systemctl_show(unit):
    try:
        out = subprocess.run(["systemctl", "show", "-p", "Result,ExecMainStatus,ActiveState,SubState", "--", unit],
                             capture_output=True,
                             text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return dict(line.split("=", 1) for line in out.split("\n") if "=" in line)


def held(unit, exists=os.path.exists):
    """The hold drop-in's path when on-call holds the unit (docs/runbook.md#stop-the-automation), else None."""
    try:
        path = hold_path(unit)
    except ValueError:
        return None
    return path if exists(path) else None


def record(settings, unit, why, now, warn):
    """needed_human in the current start's verdict.json and, for a start limit, the metrics
    file's end of the run (in progress 0, gave_up, needed a human). The start record
    (dict) it wrote, or None when there is no start to mark."""
    root = settings.starts_dir
    name = start_records.current_name(root)
    rec = start_records.read_record(root, name) if name else None
    if rec is None:
        warn("no start record under %s to mark" % root)
        return None
    rec.pop("dir", None)
    rec["needed_human"] = {"why": why, "at": round(now, 3), "words": words(why, unit, rec)}
    if rec.get("verdict") == "running":   # the supervisor was killed before its verdict
        rec["verdict"] = "interrupted"
    path = os.path.join(root, name, start_records.VERDICT)
    start_records.WriteGuard(warn).attempt(path, lambda: start_records.write_verdict(root, name, rec))
    if why == START_LIMIT and settings.metrics_dir:
        _finish_metrics(settings, rec, now, warn)
    return rec


def _finish_metrics(settings, rec, now, warn, outcome="gave_up"):
    name = file_name(settings.unit)
    previous = read_metrics_file(settings.metrics_dir, name, warn)
    metrics = StartMetrics(settings.unit, previous_text=previous, clock=lambda: now, host=settings.host)
    metrics.finish(outcome, rec.get("reason_code") or "", (rec.get("restarts") or 0) + 1,
                   phases=record_phases(rec))
    try:
        write_textfile(settings.metrics_dir, name, metrics.render())
    except OSError as exc:
        warn("warning: cannot write %s (%s)" % (exc.filename or name, exc.strerror or exc))


def main(argv, environ=None, show=None, now=time.time, sleep=time.sleep):
    """sglang-unit-failed --settings FILE.json UNIT; the exit status (0 also when nothing
    needed recording: the handler never fails the unit's failure a second time)."""
    environ = os.environ if environ is None else environ
    if len(argv) != 3 or argv[0] != "--settings":
        sys.stderr.write("usage: sglang-unit-failed --settings FILE.json UNIT\n")
        return EXIT_USAGE
    try:
        settings = SupervisorSettings.load(argv[1])
    except ValueError as e:
        sys.stderr.write("sglang-unit-failed: %s\n" % e)
        return EXIT_SETTINGS
    unit = argv[2]

    def say(text):   # one journal line, whatever a record named in it held
        sys.stderr.write("sglang-unit-failed: %s\n" % inert(text))

    result, status = unit_result(unit, environ, show)
    hold = held(unit)
    if hold and result and result != "success":
        name = start_records.current_name(settings.starts_dir)
        rec = start_records.read_record(settings.starts_dir, name) if name else None
        if rec is not None and settings.metrics_dir:
            _finish_metrics(settings, rec, now(), say, outcome="interrupted")
        say("%s failed with %s (exit status %s) while on-call holds it (%s): systemd does not start it again "
            "until the hold is released; nothing to page" % (unit, result, status, hold))
        return 0
    why = needs_human(result, status)
    if why is None and result and result != "success":
        why = needs_human(result, status, restart_coming(unit, show, sleep))
    if why is None:
        say("%s failed with %s (exit status %s): systemd restarts it, nothing to record" % (unit, result, status))
        return 0
    rec = record(settings, unit, why, now(), say)
    if rec is not None:
        say(rec["needed_human"]["words"])
    return 0
