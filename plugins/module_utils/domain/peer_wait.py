"""A peer that is late: a rank of a server over several nodes waiting at the rendezvous. Pure, no I/O.

A rank that began torch.distributed's init (`Init torch distributed begin` without its end) on a
server of `--nnodes` > 1 waits for the other nodes, not for anything of this host: restarting this
node cannot bring a peer. So while it waits no stall signature of this node decides; the start is
shown as waiting for the node named, with what the probe found at `--dist-init-addr` (the
observation's `peers`), up to the rendezvous's own timeout (server_layout.py: `--dist-timeout`, else
torch's NCCL default, 10 minutes). Past it (and `peer_timeout_grace_s`), or when the ranks die at that timeout,
the start ends as `peer_missing`, naming the node that never came. With `--nnodes 1` a rank at
the rendezvous waits for nothing but itself: the stall signatures decide (a local stall).
"""
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.durations import fmt_duration
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.server_layout import layout_from_dict

WAITING_PEER = "waiting_peer"
PEER_MISSING = "peer_missing"
# A death this close to the rendezvous's timeout is the timeout's (torch raises, the ranks exit).
TIMEOUT_SHARE = 0.9


class PeerWait:
    """The server's layout, the rendezvous's state and the latest peer probe."""

    def __init__(self, settings, layout=None):
        self.settings = settings
        self.layout = layout
        self.peers = None      # the latest `peers` observation
        self.since_t = None    # the poll that first saw this node waiting

    def read(self, obs):
        """Take in one observation's `peers` (it carries the layout when none was given)."""
        peers = obs.get("peers")
        if not isinstance(peers, dict):
            return
        self.peers = peers
        if self.layout is None:
            self.layout = layout_from_dict(peers)

    def waiting(self, t, rendezvous_t, at_rendezvous):
        """True while this node of several waits at the rendezvous; the first such poll starts the clock."""
        if self.layout is None or not self.layout.several_nodes or not at_rendezvous:
            self.since_t = None
            return False
        if self.since_t is None:
            self.since_t = min(t, rendezvous_t) if rendezvous_t is not None else t
        return True

    def elapsed_s(self, t):
        return 0.0 if self.since_t is None else t - self.since_t

    def timed_out(self, t):
        return self.since_t is not None and self.elapsed_s(t) >= self.layout.rendezvous_timeout_s + self.settings.peer_timeout_grace_s

    def died_of_timeout(self, t):
        """A death now is the rendezvous giving up (torch's timeout), not a fault of this node."""
        return self.since_t is not None and self.elapsed_s(t) >= TIMEOUT_SHARE * self.layout.rendezvous_timeout_s

    def missing_nodes(self):
        """The nodes this node waits for, in words: "node 0", "node 1", "nodes 1-3"."""
        nodes = self.layout.awaited_nodes()
        if len(nodes) == 1:
            return "node %d" % nodes[0]
        return "nodes %d-%d (one or more)" % (nodes[0], nodes[-1])

    def probe_words(self):
        """What the probe found at the meeting address: "127.0.0.1:20000: refused"."""
        addr = self.layout.dist_init_addr or "?"
        state = None
        for entry in (self.peers or {}).get("nodes") or ():
            if isinstance(entry, dict) and entry.get("addr") == addr:
                state = entry.get("state")
        return "%s: %s" % (addr, state or "not probed")

    def words(self, t):
        """`waiting for node 1 at 127.0.0.1:20000: open · 2m10s of 30m`."""
        return "waiting for %s at %s (%s of the rendezvous's %s)" % (
            self.missing_nodes(), self.probe_words(), fmt_duration(self.elapsed_s(t)),
            fmt_duration(self.layout.rendezvous_timeout_s))

    def missing_words(self, t):
        return "%s never joined the rendezvous at %s; this node waited %s (its timeout %s); restarting it cannot bring the other" % (
            self.missing_nodes(), self.probe_words(), fmt_duration(self.elapsed_s(t)),
            fmt_duration(self.layout.rendezvous_timeout_s))

    def evidence(self, t):
        return {"layout": self.layout.to_dict(), "missing": self.missing_nodes(), "peers": self.peers,
                "waited_s": round(self.elapsed_s(t), 1)}
