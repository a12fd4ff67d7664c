"""The restart action's side of the start outlook (module_utils/services/start_outlook.py): the
history of the host's earlier starts from the artifacts folder, and the metrics file
read from and written to the host through the action's shell step."""
import os
import shlex

from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_history import (
    HISTORY_LIMIT, artifact_traces, load_history)
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_metrics import file_name
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.start_outlook import StartOutlook

WRITE_TIMEOUT_S = 30


def read_cmd(folder, name):
    """Print the metrics file if there is one (its counters carry on)."""
    return "cat %s 2>/dev/null; true" % shlex.quote(os.path.join(folder, name))


def write_cmd(folder, name, text):
    """Write folder/name atomically: a temporary name node_exporter ignores, then mv."""
    q = shlex.quote
    return ("umask 022; mkdir -p {d} && t=$(mktemp {d}/.{n}.XXXXXX) && printf '%s' {text} > \"$t\" "
            "&& chmod 0644 \"$t\" && mv -f \"$t\" {d}/{n}").format(d=q(folder), n=q(name), text=q(text))


def outlook_for(host_dir, unit, metrics_dir, shell, warn, host=None):
    """A StartOutlook for one run: history from host_dir (artifacts/<host>), the metrics
    file on the host when metrics_dir is set. shell(cmd, timeout_s) -> (rc, out, err);
    host: the inventory name (the metrics' `host` label)."""
    history = load_history(artifact_traces(os.path.dirname(host_dir), os.path.basename(host_dir)),
                           limit=4 * HISTORY_LIMIT)
    if not metrics_dir:
        return StartOutlook(unit, history, warn=warn, host=host)
    rc, previous, dummy_err = shell(read_cmd(metrics_dir, file_name(unit)), WRITE_TIMEOUT_S)

    def write(name, text):
        rc, out, err = shell(write_cmd(metrics_dir, name, text), WRITE_TIMEOUT_S)
        if rc != 0:
            raise RuntimeError("writing %s/%s failed (rc %s): %s" % (metrics_dir, name, rc, (err or out).strip()[-200:]))
    return StartOutlook(unit, history, write=write, previous_text=previous if rc == 0 else None, warn=warn,
                        host=host)
