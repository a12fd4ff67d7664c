"""After READY=1: whether the supervised server still serves. A server answers a one-token
completion every liveness_interval_s (WATCHDOG=1 after each answer, or while /metrics shows
its work moving: work_counters.py); a weight cache daemon's launcher still runs and every
GPU's ready file names a live daemon. Each check ends in the failure class and its words
once the server no longer serves; a server that exited is named by its last lethal line."""
from ansible_collections.sglang_ops.serving.plugins.module_utils.host import http_check
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import failure_classes, log_lines
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.progress_line import SEP
from ansible_collections.sglang_ops.serving.plugins.module_utils.services import work_counters
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.weight_cache_watch import ready_words

DAEMON_DIED = "weight_cache_daemon_died"
# Liveness answers that prove the server is up but refuse the key it was started with.
AUTH_REFUSED = (401, 403)
AUTH_MISMATCH = "auth_mismatch"
# A liveness completion unanswered while the server's work moves (work_counters.py).
BUSY = "busy"
# How long a server that exited while serving may take to hand over its last lines.
PUMP_DRAIN_S = 2.0


class ServingLiveness:
    """The liveness checks of one ready server (server_process.ServerProcess), each loop
    returning (failure class, words) when the server no longer serves. sleep raises when
    a stop is requested; say writes one journal line; notify is the sd_notify.Notifier."""

    def __init__(self, settings, server, api_key, notify, say, sleep):
        self.s, self.server, self.api_key = settings, server, api_key
        self.notify, self.say, self.sleep = notify, say, sleep

    def completions(self):
        """A completion every liveness_interval_s; returns the reason the server is no
        longer serving (process_exited or hang_after_ready) with its words. A completion
        refused for its key (401/403) is an answer, not a miss: the server is up but holds
        another key than the one it was started with (auth_mismatch). An unanswered
        completion while /metrics shows work moving (work_counters.py) is a busy server,
        not a miss."""
        misses, work, state = 0, work_counters.read(self.s.base_url), "serving"
        while True:
            self.sleep(self.s.liveness_interval_s)
            if self.server.child.poll() is not None:
                return exit_after_ready(self.server)
            answer = http_check.post_completion(self.s.base_url, self.s.model, self.api_key, self.s.liveness_timeout_s)
            now_work = work_counters.read(self.s.base_url)
            moved = work_counters.moved(work, now_work)
            work = now_work if now_work is not None else work
            check = liveness_state(answer, bool(moved))
            if check == AUTH_MISMATCH:
                misses, state = 0, self._auth_mismatch(answer, state)
                continue
            if check == "serving":
                misses, state = 0, self._serving(answer, moved, state)
                continue
            misses, state = misses + 1, "miss"
            words = "completion %s" % _unanswered(answer)
            self.say("liveness check missed %d/%d: %s" % (misses, self.s.liveness_misses, words))
            self.notify.status("ready%sliveness check missed %d/%d (%s)" % (SEP, misses, self.s.liveness_misses, words))
            if misses >= self.s.liveness_misses:
                return "hang_after_ready", "%d one-token completions in a row went unanswered (the last: %s) " \
                    "and %s" % (misses, words, "/metrics showed no work meanwhile (no prompt or generated tokens, "
                                "no running or queued request leaving)" if now_work is not None else
                                "no work could be read meanwhile (/metrics does not answer)")

    def _auth_mismatch(self, answer, state):
        """A completion refused for its key: warned once, fed to the watchdog; the new state."""
        words = "completion refused with %s: the server does not take the API key it was started with " \
                "(%s changed?); restart the unit to apply a new key" % (answer["status"], self.s.api_key_file)
        if state != AUTH_MISMATCH:
            self.say("warning: %s: %s" % (AUTH_MISMATCH, words))
        self.notify.send(WATCHDOG=1, STATUS="ready%sserving%s%s: %s" % (SEP, SEP, AUTH_MISMATCH, words))
        return AUTH_MISMATCH

    def _serving(self, answer, moved, state):
        """A completion answered, or the server's work moved meanwhile (busy); the new state."""
        if answer["ok"]:
            if state != "serving":
                self.say("the liveness completion is %s again" % ("accepted" if state == AUTH_MISMATCH else "answered"))
            state, last = "serving", "completion in %.0f ms" % answer["ms"]
        else:
            last = "busy: completion %s, %s" % (_unanswered(answer), ", ".join(moved))
            if state != BUSY:
                self.say("the liveness completion went unanswered but the server is working (%s): "
                         "busy, not a miss" % ", ".join(moved))
            state = BUSY
        self.notify.send(WATCHDOG=1, STATUS="ready%sserving%slast check %s" % (SEP, SEP, last))
        return state

    def cache_daemon(self, cache_watch):
        """The weight cache daemon's liveness (cache_watch: its weight_cache_watch.WeightCacheWatch):
        the launcher still runs and every GPU's ready file names a live daemon; (code,
        reason) when that ends. A ready file that names no pid, not the daemon or cannot be
        read while its daemon's socket listens, or a live daemon whose socket is unusable, is
        a warning (weight_cache_watch)."""
        warned = ()
        while True:
            self.sleep(self.s.liveness_interval_s)
            child = self.server.child
            if child.poll() is not None:
                return DAEMON_DIED, "the weight cache daemon exited with status %s after ready" % child.returncode
            health = cache_watch.check(launcher_pid=child.pid)
            if not health.healthy:
                return DAEMON_DIED, "after ready: %s" % health.reason
            warnings = cache_watch.warnings
            if warnings and warnings != warned:
                self.say("warning: %s; the daemon serves, it is left running" % "; ".join(warnings))
            elif warned and not warnings:
                self.say("every ready file names its daemon again")
            warned = warnings
            status = "ready%s%s" % (SEP, ready_words(health, len(cache_watch.uuids)))
            if warnings:
                status += "%swarning: %d GPU(s) with a ready file or socket at fault" % (SEP, len(warnings))
            self.notify.send(WATCHDOG=1, STATUS=status)


def exit_after_ready(server):
    """(failure class, words) of a server that exited while serving: the most specific
    lethal line among its last ones names the class (the engine's line when its weight
    cache daemon died, not the launcher's generic reaction after it); without one,
    process_exited."""
    server.pump.join(PUMP_DRAIN_S)   # the server's last lines, written before it went
    words = "the server exited with status %s after ready" % server.child.returncode
    lethal = [line for line in map(log_lines.classify, server.pump.tail_lines())
              if line.lethal and line.fatal_code in failure_classes.FAILURE_CLASSES]
    if not lethal:
        return "process_exited", words
    named = min(reversed(lethal), key=lambda line: log_lines.fatal_priority(line.fatal_code))
    return named.fatal_code, "%s: %s" % (words, named.text[:300])


def liveness_state(answer, serving):
    """What one liveness check says: "serving" (a completion answered, or the server's work
    moved meanwhile), AUTH_MISMATCH (the completion was refused for its key: the
    server answered) or "miss"."""
    if answer["ok"] or serving:
        return "serving"
    if answer["status"] in AUTH_REFUSED:
        return AUTH_MISMATCH
    return "miss"


def _unanswered(answer):
    """How a liveness completion that did not answer ended, in words."""
    return "%s after %.0f ms" % ("answered %s" % answer["status"] if answer["status"] else "unanswered", answer["ms"])
