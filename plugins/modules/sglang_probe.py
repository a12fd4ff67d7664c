#!/usr/bin/python
# Copyright: sglang-ops maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""What is read of an SGLang service's host: one observation for the restart watcher, and on
request the unit's state, the GPU holders, the unit's processes and the diagnostics bundle."""

DOCUMENTATION = r"""
module: sglang_probe
short_description: Take one observation of an SGLang service (unit state, processes, GPUs, journal, HTTP)
description:
  - Reads, on the target host, everything the start-up watcher needs to tell a slow
    start from a stuck one, and returns it as one observation in the C(sglang-trace/1)
    format, with wall-clock epoch seconds in C(ts) (also in each log record).
  - "Reads: the unit's state (one C(systemctl show)); over every process of the unit's
    cgroup (cgroup v2, v1 or hybrid): count, CPU seconds, storage read/write bytes,
    process names and states; per-GPU memory, utilisation and power, and the processes
    holding GPU memory (C(nvidia-smi), under a timeout); journal records since a cursor
    (C(journalctl -o json --all); byte-array messages such as tqdm bars are decoded,
    carriage returns kept); C(/health) and, once it answers 200, a one-token
    C(/v1/completions); py-spy stacks of every rank when asked."
  - A reader that fails (nvidia-smi missing or hung, no journal, py-spy absent) leaves
    its field out and names it in RV(missing) with the reason; the module itself does
    not fail for that.
  - With I(pid) instead of I(unit) it watches a bare process tree (hosts without
    systemd); unit and journal fields are then absent, and I(log_file) can stand in for
    the journal.
  - On request (unit mode only) it also returns the unit's state with its ExecStart and
    venv (RV(unit_state)), every process holding GPU memory with whether it is in the
    unit's cgroup (RV(gpu_holders)), every process in the unit's cgroup
    (RV(unit_processes)), and the diagnostics bundle of a failed start (RV(diagnostics));
    and the unit supervisor's start records (RV(starts)) and one start's files
    (RV(start_files)), and the requests the server is running and queueing from its
    C(/metrics) (RV(running_requests), what a load balancer drain waits for);
    I(observation=false) skips the observation for such a read.
  - Only reads; check mode is supported and changes nothing either way.
version_added: "0.1.0"
options:
  unit:
    description: systemd unit to observe. Exactly one of I(unit) and I(pid) is required.
    type: str
  pid:
    description: Observe this PID and its descendants instead of a unit.
    type: int
  cursor:
    description:
      - RV(cursor) from the previous call; only journal records after it are returned.
      - Without it, records since I(since_epoch_s) (or since the unit left the inactive state).
    type: str
  since_epoch_s:
    description: Epoch seconds; first call only, the journal is read from then.
    type: float
    aliases: [since]
  log_file:
    description: With I(pid), a file holding the process's stderr, read like a journal (records end at newline).
    type: path
  max_log_records:
    description: At most this many log records per call; the rest arrive on the next call.
    type: int
    default: 2000
  base_url:
    description:
      - The server's base URL, e.g. C(http://127.0.0.1:30001).
      - Without it, C(http://HOST:PORT) from I(host) and I(port); without those either, no HTTP check.
    type: str
  host:
    description: Address the server listens on, used with I(port) when I(base_url) is not given.
    type: str
    default: 127.0.0.1
  port:
    description: The server's HTTP port, used when I(base_url) is not given.
    type: int
  model:
    description: Model name sent in the one-token completion (the server's served model name).
    type: str
    default: default
    aliases: [completion_model]
  completion:
    description: When to send the one-token completion. C(auto) sends it only once C(/health) answers 200.
    type: str
    choices: [auto, always, never]
    default: auto
  api_key_file:
    description:
      - The server's C(--config) YAML file holding the API key (its C(api-key) line, as the
        sglang_service role writes it); read on the target, never returned.
    type: path
  api_key:
    description: The API key itself, when it is not in a file on the target. Never returned.
    type: str
  stacks:
    description: Also take a py-spy dump of every rank (scheduler process), innermost frame first.
    type: bool
    default: false
    aliases: [want_stacks]
  venv_bin:
    description:
      - The service virtualenv's bin folder, where py-spy is looked for before PATH.
      - Without it, the folder of the main process's interpreter (its command line's first
        word, e.g. C(/opt/sglang/venvs/0.5.23/bin/python)) is tried, then PATH.
    type: path
  nvidia_smi:
    description: nvidia-smi executable (name on PATH or a path).
    type: str
    default: nvidia-smi
  gpu_timeout_s:
    description: Limit for each nvidia-smi call; a hung driver gives an absent field, not a hung task.
    type: float
    default: 5.0
  http_timeout_s:
    description: Limit for the C(/health) request.
    type: float
    default: 3.0
  completion_timeout_s:
    description: Limit for the one-token completion.
    type: float
    default: 10.0
  command_timeout_s:
    description: Limit for C(systemctl) and C(journalctl).
    type: float
    default: 5.0
  pyspy_timeout_s:
    description: Limit for each py-spy dump.
    type: float
    default: 5.0
  observation:
    description:
      - Take the observation (RV(observation), journal, HTTP check).
      - Set to false to read only what I(unit_state), I(holders) or I(unit_processes) ask for.
    type: bool
    default: true
  unit_state:
    description: Also return RV(unit_state), also for a unit that is not installed. Needs I(unit).
    type: bool
    default: false
  holders:
    description: Also return RV(gpu_holders). Needs I(unit).
    type: bool
    default: false
  unit_processes:
    description: Also return RV(unit_processes). Needs I(unit).
    type: bool
    default: false
  diagnostics:
    description:
      - Also return RV(diagnostics), with the journal since I(since_epoch_s) (its last lines without it). Needs I(unit).
      - Takes up to a minute per command on a wedged host; meant for a start that already failed.
    type: bool
    default: false
  starts:
    description:
      - Also return RV(starts), the last this many start records of the unit's supervisor (its per-start
        folders under I(starts_dir)); 0 for none.
    type: int
    default: 0
  start_files:
    description: Also return RV(start_files), the files of this start's folder (a name under I(starts_dir)).
    type: str
  starts_dir:
    description: The unit supervisor's per-start folders (roles/sglang_service, C(/var/lib/) plus its C(sglang_service_starts_state_directory)).
    type: path
    default: /var/lib/sglang-ops/starts
  running_requests:
    description:
      - Also return RV(running_requests), read from the server's C(/metrics) at I(base_url) (or I(host) and
        I(port)), which SGLang serves without the API key when it runs with C(--enable-metrics).
      - Limited by I(http_timeout_s).
    type: bool
    default: false
notes:
  - Needs read access to C(/proc/PID/io) of the service's processes (root, or the
    service's user); without it storage bytes are left out.
  - py-spy needs ptrace rights over the service's processes (root or CAP_SYS_PTRACE).
  - Aimed at well under 0.5 s of CPU per call for an 8-rank service; RV(cost) reports it.
author:
  - sglang-ops maintainers (@sglang-ops)
"""

EXAMPLES = r"""
- name: Observe the service
  sglang_ops.serving.sglang_probe:
    unit: sglang-k26-ddtree
    port: 30001
    model: kimi-k2.6
    api_key_file: /etc/sglang/sglang-k26-ddtree.yaml
  register: probe

- name: Next observation, journal from where the last one stopped, with stacks
  sglang_ops.serving.sglang_probe:
    unit: sglang-k26-ddtree
    cursor: "{{ probe.cursor }}"
    stacks: true
    venv_bin: /opt/sglang/venvs/0.5.23/bin

- name: Before a restart, what holds the GPUs and whether it belongs to the unit
  sglang_ops.serving.sglang_probe:
    unit: sglang-k26-ddtree
    observation: false
    unit_state: true
    holders: true

- name: After a load balancer drain, what the server is still working on
  sglang_ops.serving.sglang_probe:
    unit: sglang-k26-ddtree
    port: 30001
    observation: false
    running_requests: true
  register: busy
  # busy.running_requests: {running: 2, queued: 0}, or null with busy.missing.running_requests

- name: A bare process on a host without systemd
  sglang_ops.serving.sglang_probe:
    pid: 4242
    log_file: /var/log/sglang/stderr.log
"""

RETURN = r"""
observation:
  description:
    - One observation in the C(sglang-trace/1) format with C(ts) (epoch seconds) instead of C(t).
    - "Keys: C(ts), C(unit) {active, sub, main_pid, restarts, exec_main_status, result},
      C(procs) {count, cpu_s, read_bytes, write_bytes, comm, states}, C(gpus) [{index,
      mem_used_mib, mem_total_mib, util_pct, power_w}], C(gpu_procs) [{pid, gpu,
      mem_mib}], C(log) [{ts, msg, line_break}], C(http) {health, completion}, C(stacks)
      [{pid, rank, frames}]. Any key but C(ts) may be absent (see RV(missing))."
  returned: when I(observation) is true (the default)
  type: dict
  sample:
    ts: 1795984356.97
    unit: {active: active, sub: running, main_pid: 1986, restarts: 0, exec_main_status: 0, result: success}
    procs: {count: 10, cpu_s: 78.9, read_bytes: 8590000128, write_bytes: 8192, comm: {python3: 10}, states: {S: 10}}
    gpus: [{index: 0, mem_used_mib: 9007, mem_total_mib: 143771, util_pct: 99, power_w: 649.61}]
    gpu_procs: [{pid: 1986, gpu: 0, mem_mib: 8998}]
    log: [{ts: 1795984355.1, msg: "[2026-11-29 20:40:58 TP0] Load weight end. elapsed=28.85 s"}]
    http: {health: null, completion: null}
cursor:
  description: Journal cursor (or log file offset) to pass as I(cursor) next time.
  returned: always
  type: str
missing:
  description: Fields left out of RV(observation), each with the reason it could not be read.
  returned: always
  type: dict
  sample: {gpus: "nvidia-smi --query-gpu timed out", gpu_procs: "skipped: nvidia-smi --query-gpu timed out"}
unit_state:
  description:
    - The unit's state from C(systemctl show); C(installed) is false when systemd does not know the unit.
    - C(venv) is the virtualenv whose Python ExecStart runs (also after the supervisor's C(--)), or null.
  returned: when I(unit_state) is true and systemctl answered (else named in RV(missing))
  type: dict
  sample: {installed: true, load_state: loaded, active: active, sub: running, main_pid: 1986, result: success,
           exec_start: "{ path=/opt/sglang/venvs/0.5.23/bin/python ; argv[]=/opt/sglang/venvs/0.5.23/bin/python -m sglang.launch_server ; }",
           venv: /opt/sglang/venvs/0.5.23}
gpu_holders:
  description:
    - Every process holding GPU memory, with C(in_unit) true when its C(/proc/PID/cgroup) names
      the unit's cgroup (any hierarchy), and every GPU's memory.
    - C(available) is false, with the reason in C(error), when nvidia-smi is missing or fails.
  returned: when I(holders) is true
  type: dict
  sample:
    available: true
    error: ""
    gpus: [{index: 0, uuid: GPU-5f1c, mem_used_mib: 9007, mem_total_mib: 143771}]
    holders: [{pid: 1986, gpu_uuid: GPU-5f1c, mem_mib: 8998, in_unit: true,
               cmdline: "/opt/sglang/venvs/0.5.23/bin/python -m sglang.launch_server"}]
unit_processes:
  description: Every process whose cgroup is the unit's (also left over after a stop), with its state letter.
  returned: when I(unit_processes) is true
  type: list
  elements: dict
  sample: [{pid: 1986, state: S, cmdline: "/opt/sglang/venvs/0.5.23/bin/python -m sglang.launch_server"}]
diagnostics:
  description:
    - "The diagnostics bundle, name -> text, secrets redacted: C(unit-status) (C(systemctl status) and
      C(show)), C(journal) (its last 5000 lines), C(nvidia-smi) (the full table and the compute apps),
      C(ports) (C(ss -ltnp) or C(netstat -ltnp)), C(processes) (the unit's, with states), and one
      C(py-spy-rank<N>) or C(py-spy-pid<PID>) per Python process of the unit (C(py-spy) when none is left)."
    - A command that cannot run, times out or fails says so inside its own entry.
  returned: when I(diagnostics) is true
  type: dict
  sample: {unit-status: "...", journal: "...", nvidia-smi: "...", ports: "...", processes: "pid state command\n1986\tS\t...",
           py-spy-rank0: "PYSPY 1990 (the rank's process title)\nThread 1990 (idle): \"MainThread\"\n..."}
starts:
  description:
    - The unit supervisor's last starts, newest first, each its C(verdict.json) with C(dir) added; a start left
      C(running) that is not the current one reads C(interrupted) (its supervisor was killed).
  returned: when I(starts) is more than 0
  type: dict
  sample: {current: 20261130T182239Z-6072, starts: [{verdict: stalled, phase: weight_load, reason_code: stall_idle,
           exit_code: 76, started_at: 1796048912.2, dir: /var/lib/sglang-ops/starts/20261130T182239Z-6072}]}
start_files:
  description: One start's files, path in its folder -> text (null when unreadable).
  returned: when I(start_files) is set and names a start's folder (else named in RV(missing))
  type: dict
  sample: {trace.jsonl: "...", verdict.json: "...", diagnostics/py-spy.txt: "..."}
refused:
  description:
    - What the start folders held that was not read, one line each naming the path and why (a symbolic link, a
      FIFO or device, a hard link, a file of another owner, a file over its bound); such a file is null in
      RV(start_files).
  returned: when I(starts) or I(start_files) met such an entry
  type: list
  elements: str
  sample: ["refused /var/lib/sglang-ops/starts/20261130T182239Z-6072/diagnostics/zz.txt: a symbolic link where a
           regular file is expected; not copied"]
running_requests:
  description:
    - C(running) is C(sglang:num_running_reqs), C(queued) C(sglang:num_queue_reqs), each summed over its label
      sets, from the server's C(/metrics).
    - Null when C(/metrics) answers 404 (the server runs without C(--enable-metrics)), when nothing answers,
      or when it times out; RV(missing) then says which.
  returned: when I(running_requests) is true
  type: dict
  sample: {running: 2, queued: 0}
cost:
  description: This call's own cost on the target, C(cpu_s) (including its child commands) and C(wall_s).
  returned: always
  type: dict
  sample: {cpu_s: 0.046, wall_s: 0.058}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang_ops.serving.plugins.module_utils.host.probe import (
    argument_spec, probe, request_from_params, request_problems)


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True,
                           required_one_of=[("unit", "pid")], mutually_exclusive=[("unit", "pid")],
                           required_by={"log_file": "pid"})
    req = request_from_params(module.params)
    problems = request_problems(req)
    if problems:
        module.fail_json(msg="; ".join(problems))
    module.exit_json(changed=False, **probe(req))


if __name__ == "__main__":
    main()
