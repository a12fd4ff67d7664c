"""Where the server runs: one host, or one node of several (SGLang's `--nnodes`, `--node-rank`,
`--dist-init-addr`, `--dist-timeout`), read from its command line. Pure, no I/O.

The ranks of every node meet at `--dist-init-addr` (node 0 serves torch's TCP store there) and
wait for each other up to `--dist-timeout` seconds. Without it SGLang 0.5.23 passes
`timeout=None` to `init_distributed_environment` and torch takes its backend's default: NCCL's
`default_pg_nccl_timeout`, 10 minutes (ProcessGroupNCCL's own default, the `TIMEOUT(ms): 600000`
SGLang's ranks log), which is what a server on GPUs uses; gloo's `default_pg_timeout` is 30 minutes.
"""
from dataclasses import dataclass

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.sglang_dialect import flag_value

TORCH_DEFAULT_DIST_TIMEOUT_S = 600.0   # torch's NCCL default; SGLang on GPUs initialises NCCL


@dataclass(frozen=True)
class ServerLayout:
    nnodes: int = 1
    node_rank: int = 0
    dist_init_addr: str = ""
    dist_timeout_s: object = None   # --dist-timeout, None when not given

    @property
    def several_nodes(self):
        return self.nnodes > 1

    @property
    def rendezvous_timeout_s(self):
        """How long a rank waits at the rendezvous before torch gives up."""
        return float(self.dist_timeout_s) if self.dist_timeout_s else TORCH_DEFAULT_DIST_TIMEOUT_S

    def awaited_nodes(self):
        """The nodes this node waits on: node 0 (whose store it joins) from the others; the rest from node 0."""
        if self.node_rank != 0:
            return [0]
        return list(range(1, self.nnodes))

    def to_dict(self):
        return {"nnodes": self.nnodes, "node_rank": self.node_rank, "dist_init_addr": self.dist_init_addr,
                "dist_timeout_s": self.dist_timeout_s}


def layout_of(argv):
    """The ServerLayout of a server's command line (a list, or a string split at blanks); a
    single host when it names no nodes or names them unreadably."""
    if isinstance(argv, str):
        argv = argv.split()
    argv = [str(a) for a in argv or ()]
    try:
        nnodes = int(flag_value(argv, "--nnodes", "1"))
        node_rank = int(flag_value(argv, "--node-rank", "0"))
        timeout = flag_value(argv, "--dist-timeout", None)
        timeout = float(timeout) if timeout else None
    except ValueError:
        return ServerLayout()
    return ServerLayout(max(1, nnodes), max(0, node_rank), flag_value(argv, "--dist-init-addr", "") or "", timeout)


def layout_from_dict(d):
    """A ServerLayout from its to_dict() (an observation's or a header's), else None."""
    if not isinstance(d, dict) or not isinstance(d.get("nnodes"), int):
        return None
    timeout = d.get("dist_timeout_s")
    return ServerLayout(max(1, d["nnodes"]), int(d.get("node_rank") or 0), str(d.get("dist_init_addr") or ""),
                        float(timeout) if isinstance(timeout, (int, float)) and timeout > 0 else None)
