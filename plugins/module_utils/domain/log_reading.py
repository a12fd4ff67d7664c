"""The detector's log channel: one poll's journal records, in their own time order. Pure, no I/O.

Records journald cut at LineMax are joined before anything reads them. Each line may enter a
phase (phases.py), move a tqdm bar (`bar`), open or sharpen rule 1's hypothesis
(line_confirmation.py), be survivable evidence, carry systemd's exit status, or move the `log`
channel; heartbeats and lines repeated for heartbeat_repeat_polls polls are noise. The times of
the latest line saying the process carries on and of the latest ordinary line are kept for rule 1.
"""
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import log_lines, sglang_dialect, tqdm_frames
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.sglang_dialect import bar_kind


class LogReading:
    """What the start's log said so far, as far as the rules need it."""

    def __init__(self, settings, phases, lines):
        self.settings = settings
        self.phases = phases          # phases.PhaseModel
        self.lines = lines            # line_confirmation.LineConfirmation
        self.bars = {}                # kind -> (n, total)
        self.ready_line = False
        self.life_log_t = None        # journal time of the latest line saying the process carries on
        self.ordinary_t = None        # journal time of the latest ordinary (non-failure) record
        self.survivable = None        # (t, code, line) of the last watchdog dump
        self._survived_traceback_t = None  # "Exception ignored in ...": the traceback after it is survived
        self._partial = None          # (t, text, polls carried) of a record journald cut at LineMax
        self._heartbeat_polls = {}
        self.rendezvous_t = None      # journal time the ranks began their rendezvous
        self.rendezvous_done = False  # a rank said it ended
        self.child_deaths = {}        # pid -> how a child died, as its launcher or the kernel said

    def read(self, records, t, moved, facts):
        """Phase markers, lethal and survivable lines, exit lines and log progress of one
        poll's records, in their own time order, cut records joined first."""
        keys_this_poll = set()
        if records and any(records[i].get("t", t) > records[i + 1].get("t", t) for i in range(len(records) - 1)):
            records = sorted(records, key=lambda r: r.get("t", t))
        partial = self._partial
        self._partial = None
        for rec in records:
            msg = rec.get("msg") or ""
            rec_t = rec.get("t", t)
            if partial is not None:
                msg, rec_t = partial[1] + msg, partial[0]
                partial = None
            if rec.get("line_break") == "line-max":
                partial = (rec_t, msg, 0)
                continue
            self._read_record(msg, rec_t, t, moved, facts, keys_this_poll)
        if partial is not None:
            if partial[2] >= 1:      # the rest never came: read what there is
                self._read_record(partial[1], partial[0], t, moved, facts, keys_this_poll)
            else:
                self._partial = (partial[0], partial[1], partial[2] + 1)
        for key in keys_this_poll:
            self._heartbeat_polls[key] = self._heartbeat_polls.get(key, 0) + 1

    def _read_record(self, msg, rec_t, t, moved, facts, keys_this_poll):
        """One (joined) record: its bar state, then each of its lines."""
        parts = tqdm_frames.frames(msg) if ("\r" in msg or "\n" in msg) else [msg]
        progress_bar = tqdm_frames.last_bar(msg) if "%" in msg else None
        if progress_bar is not None:
            self._on_bar(progress_bar, rec_t, moved)
        for part in parts:
            if progress_bar is not None and progress_bar.desc[:20] in part and tqdm_frames.parse_frame(part) is not None:
                continue   # bar frames: handled above as one bar state
            line = log_lines.classify(part)
            if line.phase is not None:
                self.phases.enter(line.phase, rec_t)
                self._on_rendezvous(log_lines.rendezvous_mark(line.text), rec_t)
                self.ready_line = self.ready_line or line.phase == "ready"
            death = sglang_dialect.child_death_line(line.text)
            if death is not None:
                self.child_deaths[death[0]] = death[1]
            if line.fatal_code or line.survivable:
                self._on_failure_line(line, part.strip(), rec_t, t, facts)
            if line.exit_status:
                facts["exit_status"] = line.exit_status
                facts["main_exited_line"] = line.text
            if line.exit_status or line.unit_done:
                continue   # systemd's words about the unit: a death sign, not progress
            if line.heartbeat or self._heartbeat_polls.get(line.key, 0) >= self.settings.heartbeat_repeat_polls:
                facts["heartbeat_lines"] = facts.get("heartbeat_lines", 0) + 1
                continue
            keys_this_poll.add(line.key)
            moved.append("log")
            if (not line.chatter or (line.survivable and not line.lethal)) and (self.life_log_t is None or rec_t > self.life_log_t):
                self.life_log_t = rec_t   # the process says it carries on
            if not line.chatter and (self.ordinary_t is None or rec_t > self.ordinary_t):
                self.ordinary_t = rec_t

    def _on_rendezvous(self, mark, rec_t):
        if mark == "begin" and self.rendezvous_t is None:
            self.rendezvous_t = rec_t
        elif mark == "end":
            self.rendezvous_done = True

    @property
    def at_rendezvous(self):
        """A rank began the rendezvous and none has ended it."""
        return self.rendezvous_t is not None and not self.rendezvous_done

    def _on_failure_line(self, line, text, rec_t, t, facts):
        """Lethal lines open (or sharpen) the fault awaiting proof; survivable ones are evidence."""
        if not line.lethal:
            if log_lines.ANNOUNCES_SURVIVED_TRACEBACK.search(line.text):
                self._survived_traceback_t = rec_t
            if line.survivable:
                facts.setdefault("survived_lines", []).append(text[:300])
            if line.survivable == "watchdog":
                self.survivable = (rec_t, line.fatal_code, text)
            return
        if line.fatal_code == "fatal_error" and not line.sticky and self._survived_traceback_t is not None \
                and rec_t - self._survived_traceback_t <= self.settings.fatal_confirm_s:
            facts.setdefault("survived_lines", []).append(text[:300])   # the traceback Python announced
            return
        facts.setdefault("fatal_lines", []).append(text[:300])
        phase = log_lines.CLASS_PHASES.get(line.fatal_code) or self.phases.phase
        self.lines.on_line(rec_t, line.fatal_code, text, phase, t, sticky=line.sticky)
        if line.fatal_code in log_lines.CLASS_PHASES:
            self.phases.enter(phase, rec_t)

    def _on_bar(self, progress_bar, t, moved):
        """A tqdm bar's state: `bar` moves when its count advanced or its total changed."""
        kind = bar_kind(progress_bar.desc) or progress_bar.desc
        prev = self.bars.get(kind)
        if prev is None or progress_bar.n > prev[0] or (prev[1] != progress_bar.total):
            moved.append("bar")
        self.bars[kind] = (progress_bar.n, progress_bar.total)
        self.phases.on_bar(kind, progress_bar.done, t)
