# The server's command line from the sglang_service role's variables. Documented in
# sglang_server_args.yml beside this file.
import json

from ansible.errors import AnsibleFilterError

# option -> (flag, kind); the order is the order of the command line. A value that means
# "leave SGLang's own" (empty, 0, false) gives no flag.
_FLAGS = (
    ("model_path", "--model-path", "text"),
    ("served_model_name", "--served-model-name", "text"),
    ("host", "--host", "always"),
    ("port", "--port", "count"),
    ("tp_size", "--tp-size", "count"),
    # multi-host: nnodes, node_rank and dist_init_addr, see _node_lines
    ("context_length", "--context-length", "count"),
    ("mem_fraction_static", "--mem-fraction-static", "fraction"),
    ("trust_remote_code", "--trust-remote-code", "switch"),
    ("speculative_algorithm", "--speculative-algorithm", "text"),
    ("speculative_draft_model_path", "--speculative-draft-model-path", "speculative text"),
    ("speculative_num_steps", "--speculative-num-steps", "speculative count"),
    ("speculative_eagle_topk", "--speculative-eagle-topk", "speculative count"),
    ("speculative_num_draft_tokens", "--speculative-num-draft-tokens", "speculative count"),
    ("tool_call_parser", "--tool-call-parser", "text"),
    ("reasoning_parser", "--reasoning-parser", "text"),
    ("loader_threads", "--model-loader-extra-config", "loader"),
    ("watchdog_timeout_s", "--watchdog-timeout", "count"),
    ("enable_metrics", "--enable-metrics", "switch"),
)
_NODE_OPTIONS = ("nodes", "node_rank", "dist_init_host", "dist_init_port")
_OPTIONAL = {"config_file": "", "extra_args": [], "nodes": [], "node_rank": 0, "dist_init_host": "",
             "dist_init_port": 20000, "weight_cache_mode": "off", "weight_cache_timeout_s": 1800}
OPTIONS = tuple(name for name, _flag, _kind in _FLAGS) + tuple(_OPTIONAL)
# "daemon" (an engine-spawned daemon that dies with the engine) brings no restart gain: the role
# runs the standalone daemon in its own unit and the engine attaches to it as a client.
_WEIGHT_CACHE_MODES = ("off", "client")
# The weight cache daemon builds the same weights as the engine from these of its options
# (SGLang compares model, parallelism, quantization and dtype, else the engine loads from disk).
_DAEMON_FLAGS = tuple(entry for entry in _FLAGS
                      if entry[0] in ("model_path", "tp_size", "trust_remote_code", "loader_threads"))
DAEMON_OPTIONS = tuple(name for name, _flag, _kind in _DAEMON_FLAGS) + ("timeout_s", "extra_args", "daemon_extra_args")


def _number(name, value, kind):
    if isinstance(value, bool):
        raise AnsibleFilterError("sglang_server_args: %s must be a number, got %r" % (name, value))
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise AnsibleFilterError("sglang_server_args: %s must be a number, got %r" % (name, value)) from None


def _switch(name, value):
    if not isinstance(value, bool):
        raise AnsibleFilterError("sglang_server_args: %s must be true or false, got %r" % (name, value))
    return value


def _line(name, flag, kind, value, options):
    if kind.startswith("speculative ") and not options["speculative_algorithm"]:
        return None
    kind = kind.split(" ")[-1]
    if kind == "always":
        return [flag, str(value)]
    if kind == "text":
        return [flag, str(value)] if value else None
    if kind == "switch":
        return [flag] if _switch(name, value) else None
    if kind == "count":
        count = _number(name, value, int)
        return [flag, str(count)] if count > 0 else None
    if kind == "fraction":
        fraction = _number(name, value, float)
        return [flag, str(fraction)] if fraction > 0 else None
    threads = _number(name, value, int)   # loader
    config = {"enable_multithread_load": True, "num_threads": threads}
    return [flag, json.dumps(config)] if threads > 0 else None


def _node_lines(options):
    """--nnodes, --node-rank and --dist-init-addr for a server over several hosts (nodes: the
    group's hosts in inventory order, dist_init_host: where they meet, the first node's address)."""
    nodes = options["nodes"]
    if not nodes:
        return []
    host = str(options["dist_init_host"])
    addr = "%s:%d" % ("[%s]" % host if ":" in host else host, _number("dist_init_port", options["dist_init_port"], int))
    return [["--nnodes", str(len(nodes))], ["--node-rank", str(_number("node_rank", options["node_rank"], int))],
            ["--dist-init-addr", addr]]


def _weight_cache_lines(options):
    """--weight-cache-mode client and its readiness timeout; nothing for off (SGLang's default)."""
    mode = options["weight_cache_mode"]
    if mode not in _WEIGHT_CACHE_MODES:
        raise AnsibleFilterError("sglang_server_args: weight_cache_mode must be one of %s, got %r"
                                 % (", ".join(_WEIGHT_CACHE_MODES), mode))
    if mode == "off":
        return []
    timeout_s = _number("weight_cache_timeout_s", options["weight_cache_timeout_s"], int)
    if timeout_s < 1:
        raise AnsibleFilterError("sglang_server_args: weight_cache_timeout_s must be at least 1, got %r" % (timeout_s,))
    return [["--weight-cache-mode", mode], ["--weight-cache-timeout", str(timeout_s)]]


def _extra_lines(name, extra):
    if not isinstance(extra, list):
        raise AnsibleFilterError("sglang_server_args: %s must be a list, got %r" % (name, extra))
    return [list(item) if isinstance(item, (list, tuple)) else item for item in extra]


def sglang_server_args(options):
    """The server's command line after `python -m sglang.launch_server`, one list per ExecStart
    line: --config (when config_file is set), the flags of the role's variables in a fixed
    order, then extra_args as given (a string or a list per line)."""
    if not isinstance(options, dict):
        raise AnsibleFilterError("sglang_server_args: expects a mapping of options, got %r" % (options,))
    unknown = sorted(set(options) - set(OPTIONS))
    missing = [name for name, _flag, _kind in _FLAGS if name not in options]
    if unknown or missing:
        raise AnsibleFilterError("sglang_server_args: %s" % "; ".join(
            (["unknown options: " + ", ".join(unknown)] if unknown else [])
            + (["missing options: " + ", ".join(missing)] if missing else [])))
    options = dict(_OPTIONAL, **options)
    lines = [["--config", str(options["config_file"])]] if options["config_file"] else []
    for name, flag, kind in _FLAGS:
        line = _line(name, flag, kind, options[name], options)
        if line:
            lines.append(line)
        if name == "tp_size":
            lines.extend(_node_lines(options))
    return lines + _weight_cache_lines(options) + _extra_lines("extra_args", options["extra_args"])


def sglang_weight_cache_daemon_args(options):
    """The weight cache daemon's command line after `python -m sglang.srt.weight_cache.daemon`,
    one list per ExecStart line: the engine's weight-shaping flags (model path, TP size,
    --trust-remote-code, the loader config), --timeout and --weight-cache-timeout (its readiness
    wait and its ranks' barrier), the engine's extra_args (so quantization, dtype and parallelism
    flags match the engine's), then daemon_extra_args."""
    if not isinstance(options, dict):
        raise AnsibleFilterError("sglang_weight_cache_daemon_args: expects a mapping of options, got %r" % (options,))
    unknown = sorted(set(options) - set(DAEMON_OPTIONS))
    missing = [name for name in DAEMON_OPTIONS if name not in options]
    if unknown or missing:
        raise AnsibleFilterError("sglang_weight_cache_daemon_args: %s" % "; ".join(
            (["unknown options: " + ", ".join(unknown)] if unknown else [])
            + (["missing options: " + ", ".join(missing)] if missing else [])))
    lines = []
    for name, flag, kind in _DAEMON_FLAGS:
        line = _line(name, flag, kind, options[name], options)
        if line:
            lines.append(line)
    timeout_s = _number("timeout_s", options["timeout_s"], int)
    if timeout_s < 1:
        raise AnsibleFilterError("sglang_weight_cache_daemon_args: timeout_s must be at least 1, got %r" % (timeout_s,))
    lines += [["--timeout", str(timeout_s)], ["--weight-cache-timeout", str(timeout_s)]]
    return (lines + _extra_lines("extra_args", options["extra_args"])
            + _extra_lines("daemon_extra_args", options["daemon_extra_args"]))


class FilterModule:
    def filters(self):
        return {"sglang_server_args": sglang_server_args,
                "sglang_weight_cache_daemon_args": sglang_weight_cache_daemon_args}
