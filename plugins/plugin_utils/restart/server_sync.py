"""One server spread over several hosts, restarted as one.

Each node's restart runs in its own Ansible worker (the nodes of a server are one batch
of restart.yml); the runs meet in one folder on the controller, which is also where every
node's artifacts go:

  artifacts/<server>/<UTC yyyymmddTHHMMSSZ>/     one run (the first node to come names it)
    server.json                  the server: its nodes in rank order
    <node>/                      that node's run folder (run.json, attempt-<n>/trace.jsonl,
                                 attempt-<n>/diagnostics/)
    sync/<stage>/<node>          the node reached the stage (preflight, released-<n>)
    sync/abort.json              the first node that could not go on, and why
    attempt-<n>.json             the server's outcome of attempt n: the first node to
                                 reach a final verdict decides for all (ready comes from
                                 node 0, the one serving the API)

Every file is created whole and at most once (written aside, then hard-linked into
place), so two nodes deciding in the same instant cannot both win, and a reader never
sees half a decision.
"""
import json
import os
import tempfile
import time

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector import Assessment
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import retry_policy
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared.artifacts import safe_name, unused_stamp_name

WAIT_POLL_S = 1.0


class ServerAborted(Exception):
    """Another node of the server gave up (or never arrived); args[0] says which and why."""

    def __init__(self, node, code, reason):
        super().__init__("%s: %s" % (node, reason))
        self.node = node
        self.code = code
        self.reason = reason


def _create_once(path, data):
    """Write data as JSON to path unless path exists; True when this call created it."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=os.path.basename(path) + ".", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2)
        fh.write("\n")
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


def _read(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None


def run_folder(root, server, run_key, now_epoch_s):
    """The folder of this run of the server under root: the nodes' runs share run_key (the
    playbook process and task), and the first node to come names the folder by its clock."""
    base = os.path.join(os.path.abspath(root), safe_name(server))
    keys = os.path.join(base, ".runs")
    os.makedirs(keys, exist_ok=True)
    key_path = os.path.join(keys, safe_name(run_key))
    _create_once(key_path, {"folder": unused_stamp_name(base, now_epoch_s)})
    folder = os.path.join(base, _read(key_path)["folder"])
    os.makedirs(folder, exist_ok=True)
    return folder


class ServerSync:
    """The meeting point of one node's run: `meet` waits for every node at a stage,
    `decide`/`decision` hold the server's outcome of each attempt, `abort` stops the others."""

    def __init__(self, folder, server, nodes, node, clock=time.monotonic, sleep=time.sleep,
                 wait_poll_s=WAIT_POLL_S):
        if node not in nodes:
            raise ValueError("%s is not a node of server %s (nodes: %s)" % (node, server, ", ".join(nodes)))
        self.folder = folder
        self.server = server
        self.nodes = list(nodes)
        self.node = node
        self.rank = self.nodes.index(node)
        self.clock = clock
        self.sleep = sleep
        self.wait_poll_s = wait_poll_s
        os.makedirs(os.path.join(folder, "sync"), exist_ok=True)
        _create_once(os.path.join(folder, "server.json"), {"server": server, "nodes": self.nodes})

    @property
    def serves_api(self):
        return self.rank == 0

    def node_folder(self):
        return os.path.join(self.folder, safe_name(self.node))

    def describe(self):
        return "server %s (node %d of %d: %s)" % (self.server, self.rank, len(self.nodes), ", ".join(self.nodes))

    # ---- giving up together -------------------------------------------------------
    def abort(self, code, reason):
        """Tell the other nodes this one cannot go on (the first abort stays)."""
        _create_once(os.path.join(self.folder, "sync", "abort.json"),
                     {"node": self.node, "code": code, "reason": reason})

    def aborted(self):
        """The abort of another node, as ServerAborted, or None."""
        record = _read(os.path.join(self.folder, "sync", "abort.json"))
        if record is None or record.get("node") == self.node:
            return None
        return ServerAborted(record["node"], record["code"], record["reason"])

    # ---- meeting -----------------------------------------------------------------
    def meet(self, stage, timeout_s):
        """Note that this node reached `stage` and wait until every node has; raises
        ServerAborted when another node gave up or one did not come within timeout_s."""
        stage_dir = os.path.join(self.folder, "sync", safe_name(stage))
        os.makedirs(stage_dir, exist_ok=True)
        _create_once(os.path.join(stage_dir, safe_name(self.node)), {"node": self.node, "stage": stage})
        deadline = self.clock() + timeout_s
        while True:
            # Everyone arrived: the meeting happened, whatever a node wrote after it (a node
            # that passed it may already have failed and given up before this one looked).
            missing = [n for n in self.nodes if not os.path.exists(os.path.join(stage_dir, safe_name(n)))]
            if not missing:
                return
            gone = self.aborted()
            if gone is not None:
                raise gone
            if self.clock() >= deadline:
                reason = "%s did not reach %s within %.0f s" % (", ".join(missing), stage, timeout_s)
                self.abort("server_node_missing", reason)
                raise ServerAborted(missing[0], "server_node_missing", reason)
            self.sleep(self.wait_poll_s)

    # ---- the server's outcome of an attempt ---------------------------------------
    def _attempt_path(self, n):
        return os.path.join(self.folder, "attempt-%d.json" % n)

    def decide(self, n, outcome):
        """Offer this node's final outcome of attempt n; returns the server's (the first offered)."""
        _create_once(self._attempt_path(n), dict(outcome, node=self.node))
        return self.decision(n)

    def decision(self, n):
        return _read(self._attempt_path(n))

    def peer_outcome(self, n, t):
        """While this node's watch of attempt n goes on: the server's outcome when another
        node decided it (or gave up), as this node's final Assessment at t; else None."""
        decided = self.decision(n)
        if decided is not None and decided["node"] != self.node:
            return _as_assessment(decided, t)
        gone = self.aborted()
        if gone is not None:
            return Assessment(t, "unknown", "failed", "server_node_gave_up",
                              "node %s gave up: %s" % (gone.node, gone.reason))
        return None

    def settle(self, n, own, max_attempts, earlier_codes, spin_grace_s=0.0):
        """The server's outcome of attempt n and what follows it, (Assessment,
        retry_policy.Decision): this node's own final verdict when it is the first, else the
        decision of the node that was. Only node 0 can call the server ready.

        A node spinning in a collective (stall_spin) may only be waiting for a peer that is
        stuck otherwise (a stalled read, a crash), whose own verdict takes longer to become
        final: for up to spin_grace_s the peers' verdict comes first."""
        if own.reason_code == "stall_spin" and self.decision(n) is None:
            deadline = self.clock() + spin_grace_s
            while self.decision(n) is None and self.aborted() is None and self.clock() < deadline:
                self.sleep(self.wait_poll_s)
        decided = self.decision(n)
        if decided is None and own.reason_code != "server_node_gave_up":
            if own.verdict == "ready":
                action, why = retry_policy.READY, own.reason
            else:
                policy = retry_policy.decide(own.reason_code, n, max_attempts, earlier_codes)
                action, why = policy.action, policy.reason
            offer = {"verdict": own.verdict, "phase": own.phase, "reason_code": own.reason_code,
                     "reason": own.reason, "t": own.t, "action": action, "why": why}
            if (own.evidence or {}).get("missing_node"):
                offer["missing_node"] = own.evidence["missing_node"]   # every node's report names it
            decided = self.decide(n, offer)
        if decided is None or decided.get("action") is None:   # another node gave up instead
            gone = self.aborted()
            reason = ("node %s gave up: %s" % (gone.node, gone.reason)) if gone else "no decision recorded"
            return (Assessment(own.t, own.phase, "failed", "server_node_gave_up", reason),
                    retry_policy.Decision(retry_policy.HAND_OVER, "another node of %s gave up" % self.server))
        return _as_assessment(decided, own.t), retry_policy.Decision(decided["action"], decided["why"])


def _as_assessment(decided, t):
    """A recorded decision as an Assessment at t, the deciding node named in the reason."""
    evidence = {"missing_node": decided["missing_node"]} if decided.get("missing_node") else {}
    return Assessment(t, decided["phase"], decided["verdict"], decided["reason_code"],
                      "node %s: %s" % (decided["node"], decided["reason"]), evidence)
