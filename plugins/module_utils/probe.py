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
from dataclasses import dataclass

from ansible_collections.sglang_ops.serving.plugins.module_utils import (
    api_key_config, cgroup, diagnostics, gpu_holders, http_check, journal_reader, logfile_reader, nvidia_smi, procfs,
    prometheus_text, pyspy, sglang_dialect,
    start_records, systemd_unit)


@dataclass
class ProbeRequest:
    unit: object = None            # systemd unit name, or
    pid: object = None             # a bare PID (its process tree is the service)
    cursor: object = None          # journal cursor (or log-file offset) from the last call
    since_epoch_s: object = None   # first call: records since then (default: the unit's start)
    log_file: object = None        # PID mode: the process's stderr redirected to a file
    base_url: object = None        # e.g. http://127.0.0.1:30001; no HTTP check when None
    model: str = "default"
    completion: str = "auto"       # auto (once /health is 200) | always | never
    api_key: object = None
    api_key_file: object = None    # the server's --config YAML holding the key
    stacks: bool = False
    venv_bin: object = None
    nvidia_smi: str = "nvidia-smi"
    gpu_timeout_s: float = 5.0
    http_timeout_s: float = 3.0
    completion_timeout_s: float = 10.0
    command_timeout_s: float = 5.0
    pyspy_timeout_s: float = 5.0
    max_log_records: int = 2000
    observation: bool = True       # False: only the reads asked for below
    unit_state: bool = False       # the unit's state (also when it is not installed)
    holders: bool = False          # GPU holders, each with whether it is in the unit's cgroup
    unit_processes: bool = False   # every process in the unit's cgroup
    diagnostics: bool = False      # the diagnostics bundle of a failed start (journal since since_epoch_s)
    # The unit supervisor's per-start folders (module_utils/start_records.py):
    starts: int = 0                # its last N start records, 0 for none
    start_files: object = None     # one start's folder name: its trace, verdict and diagnostics
    starts_dir: str = start_records.DEFAULT_ROOT
    running_requests: bool = False  # requests running and queued, from the server's /metrics


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
    if not req.base_url:
        missing["http"] = "no base_url given"
        return None
    health = http_check.get_health(req.base_url, req.http_timeout_s)
    completion = None
    if req.completion == "always" or (req.completion == "auto" and health == 200):
        key = req.api_key
        if not key:
            key, why = api_key_config.read_api_key(req.api_key_file)
            if why:
                missing["api_key"] = why
        completion = http_check.post_completion(req.base_url, req.model, key,
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


def _observe(req, missing):
    """(observation, cursor, the nvidia-smi snapshot it read)."""
    obs = {"ts": round(time.time(), 3)}

    pids, main_pid, state = _service_pids(req, obs, missing)
    if pids is not None:
        obs["procs"] = procfs.read_procs(pids).to_obs()

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
    "starts", "start_files" and "running_requests" (null with the reason in missing) when asked for."""
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
        result["gpu_holders"] = gpu_holders.holders_of(snap, service)
    if req.unit_processes and service:
        result["unit_processes"] = cgroup.unit_processes(service)
    if req.diagnostics and service:
        result["diagnostics"] = diagnostics.collect(req.unit, req.since_epoch_s, req.venv_bin)
    if req.starts:
        result["starts"] = start_records.starts_of(req.starts_dir, req.starts)
    if req.start_files:
        try:
            result["start_files"] = start_records.read_files(req.starts_dir, req.start_files)
        except ValueError as e:
            missing["start_files"] = str(e)
    if req.running_requests:
        result["running_requests"], why = read_running_requests(req.base_url, req.http_timeout_s)
        if why:
            missing["running_requests"] = why
    result["cost"] = {"cpu_s": round(_cpu_s() - cpu0, 4), "wall_s": round(time.monotonic() - wall0, 4)}
    return result
