"""One restart of a host at a time: a lock file on the host itself, so two controllers
(two operators, a cron job and an operator) exclude each other, not only two tasks of
one controller.

The lock is /run/sglang-ops/restart.lock (tmpfs: a reboot clears it), one line of JSON
naming the holder: controller host, user, PID, run id, artifacts folder, when it started
and until when it may be held (`expires_epoch_s`, the longest the run can take from its
options). Every read-modify-write of the file happens under flock(1) on a guard file
beside it, inside one short remote command, so two controllers that try at the same
moment cannot both win. The flock lasts only for that command; the lock file itself is
what lasts for the run.

While its run goes on, the holder renews the lock every `renew_every_s` (it touches the
file between polls, HostLock.sleep); the lock states how long it may go without a renewal
(`stale_after_s`: the renewal period plus the longest single step of the run, a stop or
a prewarm step, plus a margin). A controller whose process is gone stops renewing.

A lock is stale, and is replaced, when
  - its expiry has passed (host clock): the holder's run cannot still be going;
  - it was not renewed for longer than its stale_after_s (the file's mtime, host clock):
    its holder's process is gone, on whichever controller (a lock written without
    stale_after_s keeps only the other rules);
  - its holder is this controller and that PID is gone (a run killed with SIGKILL);
  - the operator says so (`break_lock: true`, `sglang-ops restart --break-lock`).
The replace is conditional on the run id read before, so a holder that changed in
between is never thrown out.
"""
import json
import os
import shlex
import socket
import time
import uuid

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.durations import fmt_duration

LOCK_DIR = "/run/sglang-ops"
LOCK_NAME = "restart.lock"
# Beyond the computed bound: diagnostics, the hand-over, a slow connection.
EXPIRY_MARGIN_S = 900.0
# A prewarm without its own limit still ends some time: the module's steps are bounded
# by what is left to read; an hour is more than reading a terabyte at 1 GB/s.
PREWARM_UNBOUNDED_S = 3600.0
# How often a running restart renews its lock, and what its stale_after_s adds beyond the
# renewal period and its longest single step (a slow connection, diagnostics).
RENEW_EVERY_S = 60.0
STALE_MARGIN_S = 300.0


class LockHeld(Exception):
    """Another restart holds the host; the message names it."""

    def __init__(self, message, holder):
        super().__init__(message)
        self.holder = holder


class LockError(Exception):
    """The lock could not be taken or read (no flock, no write access to /run)."""


def max_run_s(args):
    """Upper bound of one restart run's duration from its options (seconds)."""
    attempts = int(args.get("max_attempts") or 1)
    per_attempt = (float(args.get("stop_timeout_s") or 0) + 30 + float(args.get("release_timeout_s") or 0)
                   + 90 + float(args.get("start_timeout_s") or 0))
    backoff = (attempts - 1) * float(args.get("backoff_max_s") or 0)
    prewarm = args.get("prewarm") or {}
    prewarm_s = float(prewarm.get("max_total_s") or 0) or (PREWARM_UNBOUNDED_S if prewarm else 0.0)
    return attempts * per_attempt + backoff + prewarm_s


def longest_step_s(args):
    """The longest the run goes without a renewal of its lock: one remote step (a stop
    and its systemctl bound, one prewarm module call) (seconds)."""
    prewarm = args.get("prewarm") or {}
    stop = max(float(args.get("stop_timeout_s") or 0), float(args.get("failed_stop_timeout_s") or 0)) + 30
    return max(stop, float(prewarm.get("step_s") or 10.0) if prewarm else 0.0, 90.0)


def stale_after_s(args):
    """How long the lock may go without a renewal before any controller takes it over."""
    return RENEW_EVERY_S + longest_step_s(args) + STALE_MARGIN_S


def holder_record(args, artifacts_path, now_epoch_s, pid=None, controller=None, user=None):
    """The JSON this run writes into the lock."""
    return {
        "run_id": uuid.uuid4().hex,
        "controller": controller or socket.gethostname(),
        "user": user or _user(),
        "pid": pid or os.getpid(),
        "unit": args.get("unit"),
        "artifacts": artifacts_path,
        "started_epoch_s": round(now_epoch_s, 3),
        "expires_epoch_s": round(now_epoch_s + max_run_s(args) + EXPIRY_MARGIN_S, 3),
        "renew_every_s": RENEW_EVERY_S,
        "stale_after_s": round(stale_after_s(args), 3),
    }


def _user():
    for name in ("USER", "LOGNAME"):
        if os.environ.get(name):
            return os.environ[name]
    try:
        import pwd
        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return str(os.getuid())


def _paths(lock_dir):
    lock = lock_dir.rstrip("/") + "/" + LOCK_NAME
    return lock, lock + ".guard"


def acquire_cmd(holder, lock_dir=LOCK_DIR, replace_run_id=None):
    """Take the lock, or print who holds it. Output: `ACQUIRED`, or `HELD <host epoch>`
    and the holder's line; `REPLACED` and the old line when replace_run_id matched."""
    lock, guard = _paths(lock_dir)
    body = (
        'now=$(date +%%s)\n'
        'if [ -s %(lock)s ]; then\n'
        '  if [ -n %(replace)s ] && grep -qF %(replace_key)s %(lock)s; then\n'
        '    echo REPLACED; cat %(lock)s; echo; printf "%%s\\n" %(line)s > %(lock)s.new && mv -f %(lock)s.new %(lock)s\n'
        '  else echo "HELD $now $(stat -c %%Y %(lock)s)"; cat %(lock)s; fi\n'
        'else printf "%%s\\n" %(line)s > %(lock)s.new && mv -f %(lock)s.new %(lock)s && echo ACQUIRED; fi\n'
    ) % {"lock": shlex.quote(lock), "line": shlex.quote(json.dumps(holder, sort_keys=True)),
         "replace": shlex.quote(replace_run_id or ""),
         "replace_key": shlex.quote('"run_id": "%s"' % (replace_run_id or "-"))}
    return _guarded(lock_dir, guard, body)


def release_cmd(run_id, lock_dir=LOCK_DIR):
    """Remove the lock if (and only if) this run still holds it."""
    lock, guard = _paths(lock_dir)
    body = 'if grep -qF %s %s 2>/dev/null; then rm -f %s; echo RELEASED; else echo NOT_OURS; fi\n' % (
        shlex.quote('"run_id": "%s"' % run_id), shlex.quote(lock), shlex.quote(lock))
    return _guarded(lock_dir, guard, body)


def renew_cmd(run_id, lock_dir=LOCK_DIR):
    """Touch the lock if (and only if) this run still holds it: `RENEWED` or `NOT_OURS`."""
    lock, guard = _paths(lock_dir)
    body = 'if grep -qF %s %s 2>/dev/null; then touch %s && echo RENEWED; else echo NOT_OURS; fi\n' % (
        shlex.quote('"run_id": "%s"' % run_id), shlex.quote(lock), shlex.quote(lock))
    return _guarded(lock_dir, guard, body)


def peek_cmd(lock_dir=LOCK_DIR):
    """Who holds the lock, without taking it (check mode): `FREE` or `HELD <epoch> <its
    mtime>` + line."""
    lock, dummy_guard = _paths(lock_dir)
    return 'if [ -s %s ]; then echo "HELD $(date +%%s) $(stat -c %%Y %s)"; cat %s; else echo FREE; fi' % (
        shlex.quote(lock), shlex.quote(lock), shlex.quote(lock))


def _guarded(lock_dir, guard, body):
    # flock(1) comes with util-linux on every distribution the roles support.
    return ("umask 022; mkdir -p %s || exit 3\ncommand -v flock >/dev/null || { echo 'flock not found' >&2; exit 4; }\n"
            "exec 9>>%s\nflock -w 30 9 || { echo 'the lock guard stayed busy for 30 s' >&2; exit 5; }\n%s"
            % (shlex.quote(lock_dir), shlex.quote(guard), body))


def _number(text):
    try:
        return float(text)
    except ValueError:
        return None


def parse_answer(out):
    """(state, host_now_epoch_s or None, holder dict or None) of an acquire/peek answer;
    the holder gets `renewed_epoch_s`, the lock file's mtime, when the answer has it."""
    lines = [line for line in (out or "").splitlines() if line.strip()]
    if not lines:
        return "UNKNOWN", None, None
    head = lines[0].split()
    state = head[0]
    now = _number(head[1]) if len(head) > 1 else None
    renewed = _number(head[2]) if len(head) > 2 else None
    holder = None
    if len(lines) > 1:
        try:
            holder = json.loads(lines[1])
        except ValueError:
            holder = {"unreadable": lines[1][:200]}
        if not isinstance(holder, dict):
            holder = {"unreadable": lines[1][:200]}
        if renewed is not None and "unreadable" not in holder:
            holder["renewed_epoch_s"] = renewed
    return state, now, holder


def _unrenewed_s(holder, host_now_epoch_s):
    """(seconds since the lock's last renewal, its stale_after_s), or None when the lock
    or the answer does not tell."""
    renewed, bound = holder.get("renewed_epoch_s"), holder.get("stale_after_s")
    if host_now_epoch_s is None or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                           for v in (renewed, bound)):
        return None
    return host_now_epoch_s - renewed, bound


def stale_because(holder, host_now_epoch_s, controller, pid_alive, force=False):
    """Why the held lock may be replaced, or None when it must be respected."""
    if force:
        return "break_lock was given"
    expires = holder.get("expires_epoch_s")
    if isinstance(expires, (int, float)) and host_now_epoch_s is not None and host_now_epoch_s > expires:
        return "its run would have ended by %s" % _iso(expires)
    unrenewed = _unrenewed_s(holder, host_now_epoch_s)
    if unrenewed is not None and unrenewed[0] > unrenewed[1]:
        return "it was not renewed for %s (its holder renews it every %s while it runs; stale after %s)" % (
            fmt_duration(unrenewed[0]), fmt_duration(holder.get("renew_every_s") or RENEW_EVERY_S),
            fmt_duration(unrenewed[1]))
    pid = holder.get("pid")
    if holder.get("controller") == controller and isinstance(pid, int) and not pid_alive(pid):
        return "its process %d on this controller is gone" % pid
    return None


def describe(holder, host_now_epoch_s=None):
    """`root@ctl-1 (PID 4242), running since 2026-11-30T11:02:03Z (4m10s ago), artifacts ...`"""
    if "unreadable" in holder:
        return "an unreadable lock (%s)" % holder["unreadable"]
    started = holder.get("started_epoch_s")
    text = "%s@%s (PID %s)" % (holder.get("user", "?"), holder.get("controller", "?"), holder.get("pid", "?"))
    if isinstance(started, (int, float)):
        text += ", running since %s" % _iso(started)
        if host_now_epoch_s is not None:
            text += " (%s ago)" % fmt_duration(host_now_epoch_s - started)
    if holder.get("artifacts"):
        text += ", artifacts %s" % holder["artifacts"]
    expires = holder.get("expires_epoch_s")
    if isinstance(expires, (int, float)):
        text += "; counted stale after %s" % _iso(expires)
    unrenewed = _unrenewed_s(holder, host_now_epoch_s)
    if unrenewed is not None:
        text += ", or %s without a renewal (last renewed %s ago%s)" % (
            fmt_duration(unrenewed[1]), fmt_duration(max(0.0, unrenewed[0])),
            ": stale, its holder's process is gone; the next restart takes it over" if unrenewed[0] > unrenewed[1]
            else "")
    return text


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _iso(epoch_s):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_s))


class HostLock:
    """The lock of one host for one run, driven through shell(cmd, timeout_s) -> (rc, out, err)."""

    def __init__(self, shell, holder, lock_dir=LOCK_DIR, force=False, controller=None, alive=pid_alive):
        self.shell = shell
        self.holder = holder
        self.lock_dir = lock_dir
        self.force = force
        self.controller = controller or holder.get("controller")
        self.alive = alive
        self.held = False
        self.replaced = None  # (old holder, why) when a stale lock was taken over
        self._renewed = time.monotonic()
        self.renew_problem = None

    def acquire(self):
        """Take the lock; LockHeld names the holder, LockError when it cannot be done."""
        state, now, holder = self._run(acquire_cmd(self.holder, self.lock_dir))
        if state == "HELD":
            why = stale_because(holder, now, self.controller, self.alive, self.force)
            if why is None:
                raise LockHeld("another restart holds %s: %s. It must finish first (or, if that run is "
                               "dead, use break_lock / --break-lock)" % (
                                   self.lock_path, describe(holder, now)), holder)
            state, now, old = self._run(acquire_cmd(self.holder, self.lock_dir, holder.get("run_id") or "-"))
            if state == "HELD":  # someone else took it over meanwhile
                raise LockHeld("another restart holds %s: %s" % (self.lock_path, describe(old, now)), old)
            self.replaced = (holder, why)
        if state not in ("ACQUIRED", "REPLACED"):
            raise LockError("unexpected answer from the lock command: %r" % state)
        self.held = True
        self._renewed = time.monotonic()
        return self.replaced

    def sleep(self, seconds, clock=time.monotonic, wait=time.sleep):
        """The run's wait between polls (its host access's sleep): waits, then renews the
        lock when renew_every_s has passed since the last renewal. A renewal that fails is
        noted (renew_problem) and tried again after the next wait; the run goes on."""
        wait(seconds)
        if not self.held or clock() - self._renewed < float(self.holder.get("renew_every_s") or RENEW_EVERY_S):
            return
        self._renewed = clock()
        try:
            rc, out, err = self.shell(renew_cmd(self.holder["run_id"], self.lock_dir), 60)
        except Exception as exc:  # a lost connection: the run's own steps will say so
            self.renew_problem = "renewal failed: %s" % exc
            return
        self.renew_problem = None if rc == 0 and "RENEWED" in out else (
            "renewal failed (rc %s): %s" % (rc, (err or out or "").strip()[-200:]))

    def release(self, timeout_s=30):
        """Remove the lock if this run holds it; never raises (the run's own result matters more)."""
        if not self.held:
            return None
        try:
            rc, out, err = self.shell(release_cmd(self.holder["run_id"], self.lock_dir), timeout_s)
        except Exception as exc:  # a lost connection leaves the lock to its expiry
            return "release failed: %s" % exc
        self.held = False
        if rc != 0:
            return "release failed (rc %s): %s" % (rc, (err or out).strip()[-200:])
        return None if "RELEASED" in out else "the lock was no longer this run's"

    @property
    def lock_path(self):
        return _paths(self.lock_dir)[0]

    def _run(self, cmd):
        rc, out, err = self.shell(cmd, 60)
        if rc != 0:
            raise LockError("could not take %s (rc %s): %s" % (self.lock_path, rc, (err or out or "").strip()[-300:]))
        return parse_answer(out)
