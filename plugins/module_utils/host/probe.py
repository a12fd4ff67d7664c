"""What is read of the host, in one place: one observation of an SGLang service (a
systemd unit, or a bare PID on hosts without systemd) in the sglang-trace/1 shape with
epoch `ts`; on request, the unit's state, the GPU holders with their cgroup membership
and the processes left in the unit (what the restart checks around a stop), and the
requests the server is running (what a drain waits for). Each reader
is asked in turn; whatever cannot be read is left out and named in `missing` with the
reason. Never raises for a reader's failure: a probe that fails would blind the watcher."""
import os
import resource
import time
from dataclasses import dataclass, field, fields

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import (
    api_key_config,
    cgroup,
    diagnostics,
    gpu_holders,
    http_check,
    journal_reader,
    logfile_reader,
    nvidia_smi,
    peer_probe,
    procfs,
    pyspy,
    systemd_unit,
)
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import sglang_dialect, weight_cache
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.server_layout import layout_of
from ansible_collections.sglang_ops.serving.plugins.module_utils.records import prometheus_text, start_records


def _option(default=None, type="str", **spec):
    """A ProbeRequest field that is also an option of the sglang_probe module: its Ansible
    type and, where needed, aliases, choices or no_log."""
    spec["type"] = type
    # called only in ProbeRequest's body, where dataclass() reads what it returns
    return field(default=default, metadata={"option": spec})  # pylint: disable=invalid-field-call


@dataclass
class ProbeRequest:
    """The probe's options, defined once: the sglang_probe module's argument spec is
    generated from these fields (argument_spec()), its DOCUMENTATION is checked against
    them (tests/unit/probe/test_probe_options.py), and the controller names them
    (plugin_utils/shared/remote_host_access.py)."""
    unit: object = _option()                        # systemd unit name, or
    pid: object = _option(type="int")               # a bare PID (its process tree is the service)
    cursor: object = _option()                      # journal cursor (or log-file offset) from the last call
    # first call: records since then (default: the unit's start)
    since_epoch_s: object = _option(type="float", aliases=["since"])
    log_file: object = _option(type="path")         # PID mode: the process's stderr redirected to a file
    max_log_records: int = _option(2000, "int")
    base_url: object = _option()                    # e.g. http://127.0.0.1:30001; else from host and port
    host: str = _option("127.0.0.1")
    port: object = _option(type="int")              # no HTTP check without base_url or port
    model: str = _option("default", aliases=["completion_model"])
    completion: str = _option("auto", choices=["auto", "always", "never"])  # auto: once /health is 200
    api_key_file: object = _option(type="path")     # the server's --config YAML holding the key
    api_key: object = _option(no_log=True)
    stacks: bool = _option(False, "bool", aliases=["want_stacks"])
    venv_bin: object = _option(type="path")
    nvidia_smi: str = _option("nvidia-smi")
    gpu_timeout_s: float = _option(5.0, "float")
    http_timeout_s: float = _option(3.0, "float")
    completion_timeout_s: float = _option(10.0, "float")
    command_timeout_s: float = _option(5.0, "float")
    pyspy_timeout_s: float = _option(5.0, "float")
    observation: bool = _option(True, "bool")       # False: only the reads asked for below
    unit_state: bool = _option(False, "bool")       # the unit's state (also when it is not installed)
    holders: bool = _option(False, "bool")          # GPU holders, each with whether it is in the unit's cgroup
    unit_processes: bool = _option(False, "bool")   # every process in the unit's cgroup
    diagnostics: bool = _option(False, "bool")      # the bundle of a failed start (journal since since_epoch_s)
    # The unit supervisor's per-start folders (module_utils/records/start_records.py):
    starts: int = _option(0, "int")                 # its last N start records, 0 for none
    start_files: object = _option()                 # one start's folder name: its trace, verdict and diagnostics
    starts_dir: str = _option(start_records.DEFAULT_ROOT, "path")
    running_requests: bool = _option(False, "bool")  # requests running and queued, from the server's /metrics

    def url(self):
        """The server's base URL: base_url, else http://host:port, else None (no HTTP check)."""
        if self.base_url:
            return self.base_url
        if self.port:
            host = self.host or "127.0.0.1"
            return "http://%s:%d" % ("[%s]" % host if ":" in host else host, self.port)
        return None


UNIT_READS = ("unit_state", "holders", "unit_processes", "diagnostics")   # need a unit's cgroup
TIMEOUT_OPTIONS = tuple(f.name for f in fields(ProbeRequest) if f.name.endswith("_timeout_s"))


def argument_spec():
    """The sglang_probe module's argument spec, from ProbeRequest's fields."""
    spec = {}
    for f in fields(ProbeRequest):
        option = dict(f.metadata["option"])
        if f.default is not None:
            option["default"] = f.default
        spec[f.name] = option
    return spec


def request_from_params(params):
    """A ProbeRequest from the module's params (aliases already resolved by Ansible)."""
    return ProbeRequest(**{f.name: params[f.name] for f in fields(ProbeRequest)})


def request_problems(req):
    """What is wrong with a request beyond its types: a list of one-line messages."""
    problems = []
    if req.starts < 0:
        problems.append("starts must be 0 or more, got %d" % req.starts)
    if req.max_log_records < 1:
        problems.append("max_log_records must be at least 1, got %d" % req.max_log_records)
    asked = [key for key in UNIT_READS if getattr(req, key)]
    if asked and not req.unit:
        problems.append("%s need unit (a systemd unit's cgroup), not pid" % ", ".join(asked))
    for key in TIMEOUT_OPTIONS:
        if getattr(req, key) <= 0:
            problems.append("%s must be positive, got %s" % (key, getattr(req, key)))
    return problems


def _cpu_s():
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _rank_targets(pids, main_pid):
    """(pid, rank) of each scheduler process; the main process when none is titled."""
    targets = []
    for pid in pids:
        rank = sglang_dialect.rank_of(procfs.read_cmdline(pid) or "")
        if rank:
            targets.append((pid, rank))
    if not targets and main_pid:
        targets.append((main_pid, None))
    return targets


def _interpreter_dir(pid):
    """Folder of the service's interpreter as started (a venv's bin/, where SGLang's
    dependencies put py-spy); /proc/PID/exe would resolve past the venv's symlink."""
    cmdline = procfs.read_cmdline(pid) if pid else None
    first = cmdline.split(" ")[0] if cmdline else ""
    return os.path.dirname(first) if first.startswith("/") else None


def _service_pids(req, obs, missing):
    """PIDs of the service and its main PID; fills obs["unit"] in unit mode."""
    if req.pid is not None:
        missing["unit"] = "pid mode: no systemd unit is watched"
        pids = procfs.descendants(int(req.pid))
        if not pids:
            missing["process"] = "pid %s does not exist" % req.pid
        return pids, int(req.pid), None
    state, why = systemd_unit.read_unit(req.unit, req.command_timeout_s)
    if state is None:
        missing["unit"] = why
        missing["procs"] = "unit state unknown: " + why
        return None, None, None
    obs["unit"] = state.to_obs()
    pids, why = cgroup.cgroup_pids(state.control_group)
    if pids is None:
        if state.active in ("inactive", "failed"):
            pids = []  # stopped unit: its cgroup is gone, and that means no processes
        else:
            missing["procs"] = why
    return pids, state.main_pid, state


def _read_log(req, state, missing):
    if req.pid is not None:
        if not req.log_file:
            missing["log"] = "pid mode without log_file: no journal to read"
            return None, req.cursor
        batch, why = logfile_reader.read_logfile(req.log_file, req.cursor, req.max_log_records)
    else:
        since = req.since_epoch_s
        if since is None and state is not None:
            since = state.inactive_exit_epoch_s
        batch, why = journal_reader.read_journal(req.unit, req.cursor, since,
                                                 req.max_log_records, req.command_timeout_s)
    if batch is None:
        missing["log"] = why
        return None, req.cursor
    if batch.truncated:
        missing["log_truncated"] = "more than %d records waiting; the rest come next call" % req.max_log_records
    return [r.to_obs() for r in batch.records], batch.cursor


def _read_http(req, missing):
    base_url = req.url()
    if not base_url:
        missing["http"] = "no base_url or port given"
        return None
    health = http_check.get_health(base_url, req.http_timeout_s)
    completion = None
    if req.completion == "always" or (req.completion == "auto" and health == 200):
        key = req.api_key
        if not key:
            key, why = api_key_config.read_api_key(req.api_key_file)
            if why:
                missing["api_key"] = why
        completion = http_check.post_completion(base_url, req.model, key,
                                                req.completion_timeout_s)
    return {"health": health, "completion": completion}


def read_running_requests(base_url, timeout_s):
    """({"running": N, "queued": M}, None) from SGLang's /metrics (each summed over its label
    sets), or (None, reason) when metrics are off or the server does not answer."""
    if not base_url:
        return None, "no base_url or port given"
    url = base_url.rstrip("/") + "/metrics"
    status, text = http_check.get_page(base_url, "/metrics", timeout_s)
    if status == 404:
        return None, "%s answered 404: metrics are off (the server runs without --enable-metrics)" % url
    if status is None:
        return None, "nothing answers at %s" % url
    if status == http_check.TIMEOUT:
        return None, "%s did not answer within %s s" % (url, timeout_s)
    if status != 200:
        return None, "%s answered %s" % (url, status)
    counts = {}
    for key, metric in (("running", "sglang:num_running_reqs"), ("queued", "sglang:num_queue_reqs")):
        value = prometheus_text.sample_sum(text, metric)
        if value is None:
            return None, "%s has no %s" % (url, metric)
        counts[key] = int(value)
    return counts, None


def read_peers(cmdline):
    """The `peers` reading of a server over several nodes (its command line names --nnodes > 1
    and --dist-init-addr): its layout and whether node 0's store at that address answers; None
    for a server of one node."""
    layout = layout_of(cmdline or "")
    if not layout.several_nodes or not layout.dist_init_addr:
        return None
    state = peer_probe.connect_state(layout.dist_init_addr)
    return dict(layout.to_dict(), nodes=[{"node": 0, "addr": layout.dist_init_addr, "state": state}])


def _observe(req, missing):
    """(observation, cursor, the nvidia-smi snapshot it read)."""
    obs = {"ts": round(time.time(), 3)}

    pids, main_pid, state = _service_pids(req, obs, missing)
    if pids is not None:
        obs["procs"] = procfs.read_procs(pids).to_obs()
    peers = read_peers(procfs.read_cmdline(main_pid) if main_pid else None)
    if peers is not None:
        obs["peers"] = peers

    snap = nvidia_smi.read_gpus(req.gpu_timeout_s, req.nvidia_smi)
    if snap.gpus is not None:
        obs["gpus"] = [g.to_obs() for g in snap.gpus]
    if snap.gpu_procs is not None:
        obs["gpu_procs"] = [p.to_obs() for p in snap.gpu_procs]
    missing.update(snap.missing or {})

    log, cursor = _read_log(req, state, missing)
    if log is not None:
        obs["log"] = log

    http = _read_http(req, missing)
    if http is not None:
        obs["http"] = http

    if req.stacks:
        if pids:
            samples, why = pyspy.dump_stacks(_rank_targets(pids, main_pid),
                                             req.venv_bin or _interpreter_dir(main_pid),
                                             req.pyspy_timeout_s)
        else:
            samples, why = None, "no process to sample"
        if samples is not None:
            obs["stacks"] = samples
        else:
            missing["stacks"] = why
    return obs, cursor, snap


def probe(req):
    """-> {"observation", "cursor", "missing", "cost": {"cpu_s", "wall_s"}}, and
    "unit_state", "gpu_holders", "unit_processes", "diagnostics" when asked for (unit mode only),
    "starts", "start_files" and "running_requests" (null with the reason in missing) when asked for;
    "refused" names what a start folder held that was not read (a link, a FIFO, a file too large)."""
    wall0, cpu0 = time.monotonic(), _cpu_s()
    result = {"cursor": req.cursor, "missing": {}}
    missing = result["missing"]
    snap = None
    if req.observation:
        result["observation"], result["cursor"], snap = _observe(req, missing)
    service = systemd_unit.service_name(req.unit) if req.unit else None
    if req.unit_state and service:
        state, why = systemd_unit.show_unit(req.unit, req.command_timeout_s)
        if state is not None:
            result["unit_state"] = state.to_result()
        else:
            missing["unit_state"] = why
    if req.holders and service:
        snap = snap or nvidia_smi.read_gpus(req.gpu_timeout_s, req.nvidia_smi)
        # the weight cache daemon's memory is expected beside the engine's, never an orphan's
        result["gpu_holders"] = gpu_holders.holders_of(snap, service, expected_units=(weight_cache.daemon_unit(service),))
    if req.unit_processes and service:
        result["unit_processes"] = cgroup.unit_processes(service)
    if req.diagnostics and service:
        result["diagnostics"] = diagnostics.collect(req.unit, req.since_epoch_s, req.venv_bin)
    refused = []   # what a start folder held that is not read (safe_files)
    if req.starts:
        result["starts"] = start_records.starts_of(req.starts_dir, req.starts, warn=refused.append)
    if req.start_files:
        try:
            result["start_files"] = start_records.read_files(req.starts_dir, req.start_files, warn=refused.append)
        except ValueError as e:
            missing["start_files"] = str(e)
    if refused:
        result["refused"] = refused
    if req.running_requests:
        result["running_requests"], why = read_running_requests(req.url(), req.http_timeout_s)
        if why:
            missing["running_requests"] = why
    result["cost"] = {"cpu_s": round(_cpu_s() - cpu0, 4), "wall_s": round(time.monotonic() - wall0, 4)}
    return result
