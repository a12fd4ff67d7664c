"""One node's part in the restart of a server over several hosts (server_sync.py): the nodes
meet before each step they take together, and settle each attempt's verdict as one server.
"""
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import server_sync


class NodeMeeting:
    """The meeting points of a RestartRun whose run.server is set. ending: the run's
    RunEnding (a node that gives up, or a node that did not come, is handed over)."""

    def __init__(self, run, ending):
        self.run = run
        self.ending = ending

    def meet(self, phase, stage, timeout_s):
        """Wait until every node of the server reached stage: None, or this node's hand-over
        naming the node that gave up or did not come."""
        server = self.run.server
        self.run.stage = "waiting for every node of %s (%s)" % (server.server, stage)
        try:
            server.meet(stage, timeout_s)
        except server_sync.ServerAborted as exc:
            return self.ending.hand_over(phase, "server_node_gave_up", "node %s: %s" % (exc.node, exc.reason),
                                         because="node %s of %s could not go on, and a server over several hosts "
                                                 "restarts as one" % (exc.node, server.server))
        return None

    def peer_outcome(self, n):
        """The watch's decided_elsewhere of attempt n: another node's verdict, once there is one."""
        return lambda t: self.run.server.peer_outcome(n, t)

    def settle(self, n, assessment, earlier_codes):
        """(the server's assessment of attempt n, the server's decision or None), every node's
        verdict weighed as one server's (server_sync.ServerSync.settle)."""
        return self.run.server.settle(n, assessment, self.run.args["max_attempts"], earlier_codes, self._spin_grace_s())

    def _spin_grace_s(self):
        """How long a node that spins in a collective lets its peers' verdicts come first: the
        longest a peer's idle stall takes to be called beyond a spin, and two polls."""
        settings = self.run.options.settings
        return max(0.0, settings.stall_idle_window_s - settings.stall_spin_window_s) + 2 * self.run.args["poll_s"]
