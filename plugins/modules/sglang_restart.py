# Copyright: sglang-ops maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
# The work happens in the action plugin of the same name (plugins/action/sglang_restart.py);
# this file documents it for ansible-doc, as ansible.builtin.reboot does.

DOCUMENTATION = r"""
---
module: sglang_restart
short_description: Restart an SGLang systemd unit and watch the start with stall detection
description:
  - Runs on the controller, in the manner of M(ansible.builtin.reboot), and drives small
    remote steps on the target.
  - "Preflight: the unit exists; processes outside the unit that hold GPU memory are named
    with PID and command line. Someone else's processes stop the restart (C(gpu_busy_foreign));
    leftover server processes (title C(sglang::...) or the unit's venv Python) are killed
    only when O(kill_orphans=true), otherwise the restart stops (C(orphan_processes))."
  - "Stops the unit with C(systemctl stop): systemd sends SIGTERM and, after the unit's
    C(TimeoutStopSec=) (the sglang_service role's C(sglang_service_timeout_stop_s), 120 s),
    SIGKILL to every process of the unit. Only when C(systemctl stop) fails or has not
    returned within O(stop_timeout_s) (longer than C(TimeoutStopSec=) by default) does the
    task send SIGKILL itself. Then it waits, bounded by O(release_timeout_s), until the unit's
    cgroup is empty (sending SIGKILL again at each look while a process of the unit is left)
    and GPU memory is back to baseline."
  - Starts the unit and runs M(sglang_ops.serving.sglang_probe) every O(poll_s) seconds,
    feeds each observation to the stall detector, and prints one progress line per poll at
    default verbosity (phase, shard progress, GPU memory, disk rate, CPU, HTTP state,
    elapsed). It finishes when a real completion succeeds.
  - "On a failure or a confirmed stall it captures diagnostics (unit status, journal of the
    attempt, py-spy of each rank, nvidia-smi with compute apps, listening ports, the
    unit's processes) into the artifacts folder on the controller, then restarts when the
    failure class is one a restart can fix and attempts remain (with backoff and jitter).
    The same failure twice, or a class a restart cannot fix, hands over to a human: the
    task fails with a summary naming host, phase, reason, attempts and the artifacts path."
  - "One restart of a host at a time: the run takes a lock file on the host
    (C(/run/sglang-ops/restart.lock), naming controller, user, PID and start time)
    before anything else. A second restart of the host, from this controller or another,
    fails at once with C(restart_locked), naming the holder, and changes nothing. A lock
    whose run cannot still be going (past the longest time its options allow, or whose
    process on this controller is gone) is taken over; O(break_lock) takes over any."
  - "Ctrl-C (SIGINT) or SIGTERM on the controller ends the run where it is: run.json
    records C(outcome: interrupted), what the run was doing and the attempt being
    watched; the lock is released and the service is left as it was at that moment
    (a command already sent to the host, such as a stop, completes there)."
  - "Each progress line ends with an estimate of the time to ready and how sure it is
    (C(ETA 4m10s (3m20s-5m30s, usual 10m40s))): the current phase at its measured rate
    (shards, bytes read, GPU memory filled) plus the usual duration of the phases ahead,
    from the earlier ready starts of the host in the artifacts folder (docs/metrics.md).
    With no earlier start it says so."
  - Every attempt's observations are written as a replayable trace
    (C(attempt-<n>/trace.jsonl), format C(sglang-trace/1)), and C(run.json) records the
    run (docs/architecture.md).
  - When it gives up, the incident report is written beside C(run.json). A report that
    cannot be written (its writer failing to import or to render) is named in the output,
    in C(msg) and in C(report_error); the hand-over itself stands.
  - "A unit under its supervisor (C(sglang_service_supervisor=true), the default): the
    supervisor decides every start and systemd restarts the unit, so the task restarts it
    once and follows the supervisor's starts. Options there: O(poll_s),
    O(start_timeout_s), O(kill_orphans) (leftovers killed before the restart),
    O(prewarm), O(break_lock), O(artifacts_dir) and O(completion_model) apply; O(detector),
    O(max_attempts), O(backoff_base_s), O(backoff_max_s), O(stop_timeout_s),
    O(failed_stop_timeout_s), O(release_timeout_s) and O(gpu_idle_mib) set to anything but
    their default are refused before anything changes (C(option_not_applicable)), naming
    the role variable that does the same (C(sglang_service_supervisor_detector),
    C(sglang_service_start_limit_burst), C(sglang_service_restart_sec),
    C(sglang_service_timeout_stop_s)); O(metrics_dir) is not used, the supervisor writes
    the metrics itself. run.json then records the supervisor's settings, as its traces do."
version_added: "0.1.0"
author:
  - sglang-ops maintainers (@sglang-ops)
options:
  unit:
    description: The systemd unit running SGLang.
    type: str
    default: sglang-k26-ddtree
  port:
    description: HTTP port of the OpenAI-compatible API on the target.
    type: int
    default: 30001
  host:
    description: Address the probe uses on the target to reach the API.
    type: str
    default: 127.0.0.1
  api_key_file:
    description:
      - The server's C(--config) YAML file on the target holding the API key (its C(api-key)
        line). The probe reads the key there; it never travels to the controller, and never
        appears in output or traces.
    type: path
  poll_s:
    description: Seconds between observations.
    type: float
    default: 5.0
  max_attempts:
    description:
      - Starts in total, the first included (3 = the first start and up to 2 restarts).
      - Unsupervised units only; refused on a supervised one unless left at the default.
    type: int
    default: 3
  start_timeout_s:
    description:
      - Hard upper bound on one start. Generous on purpose; the detector, not this bound,
        tells a slow start from a stuck one (healthy silent phases of 40+ minutes exist).
    type: float
    default: 7200.0
  stop_timeout_s:
    description:
      - How long the task waits for C(systemctl stop) before it sends SIGKILL to the unit's
        processes itself.
      - "systemd kills first: SIGTERM, then SIGKILL after the unit's C(TimeoutStopSec=)
        (C(sglang_service_timeout_stop_s), 120 s); the default is that plus 30 s for the
        processes to exit. A unit with a longer C(TimeoutStopSec=) wants a longer O(stop_timeout_s)."
    type: float
    default: 150.0
  failed_stop_timeout_s:
    description:
      - Stop timeout for an instance whose start failed or stalled (before an automatic
        restart); its processes are of no use, so the task sends them SIGKILL after this,
        before systemd's C(TimeoutStopSec=) would.
    type: float
    default: 20.0
  release_timeout_s:
    description: How long to wait after a stop for the cgroup to empty and GPU memory to return to baseline.
    type: float
    default: 120.0
  gpu_idle_mib:
    description: GPU memory per GPU (MiB) above what foreign processes hold that still counts as released.
    type: int
    default: 1024
  kill_orphans:
    description:
      - Kill leftover server processes outside the unit that hold GPU memory (after the stop;
        on a supervised unit, before its restart).
    type: bool
    default: false
  artifacts_dir:
    description:
      - Controller folder for traces, diagnostics, run.json and reports
        (C(<artifacts_dir>/<inventory_hostname>/<UTC stamp>/)).
      - Default C(artifacts/) in the repository root (the parent of the playbooks folder);
        for a playbook of an installed collection (C(ansible-playbook sglang_ops.serving.restart)),
        C(artifacts/) in the current directory.
    type: path
  metrics_dir:
    description:
      - Folder on the target where node_exporter's textfile collector reads C(*.prom) files
        (Debian's C(prometheus-node-exporter) reads C(/var/lib/prometheus/node-exporter)).
      - "Every poll rewrites C(sglang_ops_<unit>.prom) there atomically: the start's phase,
        verdict, elapsed time, progress and ETA; when the run ends, its outcome, reason
        code, attempts, phase durations and time to ready; restarts by reason (docs/metrics.md)."
      - Unset (the default), no metrics file is written.
    type: path
  detector:
    description:
      - Detector settings overrides (names in docs/detector.md); unknown names fail before anything changes.
      - Unsupervised units only; on a supervised unit set C(sglang_service_supervisor_detector) instead.
    type: dict
    default: {}
  supervisor_detector:
    description:
      - The detector settings overrides of the unit's supervisor (the sglang_service role's
        C(sglang_service_supervisor_detector)), checked as O(detector) is.
      - "Used in check mode only: on a supervised unit the one observation is assessed with
        these, the settings that decide its starts; a real run follows the supervisor's
        verdicts and records the settings its traces name."
    type: dict
    default: {}
  completion_model:
    description: Model name sent with the one-token completion that proves the server ready.
    type: str
    default: default
  backoff_base_s:
    description: Wait before the first automatic restart; it doubles for each later one, with +-20% jitter.
    type: float
    default: 10.0
  backoff_max_s:
    description: Longest wait between attempts.
    type: float
    default: 120.0
  prewarm:
    description:
      - Read the model files into the page cache before stopping the old instance (which
        keeps serving meanwhile), through M(sglang_ops.serving.sglang_prewarm) in short
        steps with a progress line. Empty (the default) skips it.
      - Keys are the options of M(sglang_ops.serving.sglang_prewarm) (C(model_path),
        C(mode), ...) plus C(step_s) (seconds per module call, default 10) and
        C(max_total_s) (stop reading after this long, 0 = no limit).
      - A prewarm that fails is reported and skipped; the restart goes on.
    type: dict
    default: {}
  break_lock:
    description:
      - Take over the host's restart lock even when its holder may still be running.
        Only for a lock left by a run known to be dead (its controller crashed or lost
        the host); two live restarts of one host stop each other's start.
    type: bool
    default: false
  weight_cache:
    description:
      - "Whether the host runs SGLang's weight cache daemon beside the unit, as
        C(<unit>-weights.service) (the sglang_service role's C(sglang_service_weight_cache)).
        Unset: whether that unit is installed. V(false): the restart ignores the daemon.
        V(true) with the daemon's unit missing fails before anything changes."
      - "With the weight cache each start is warm or cold, decided per attempt. Warm: the
        unit alone is restarted and re-attaches to the weights the daemon holds on the GPUs;
        the daemon's processes are expected GPU holders (never leftovers to kill), and a
        stop waits for the unit's own GPU memory only. Cold: the unit is stopped, the daemon
        restarted and its start followed (ready when its supervisor says every GPU's weights
        are ready), then the unit started. Cold when O(cold) is set, when the daemon is not
        healthy (its unit not active/running or its newest start not ready), when the
        previous start of this run was warm and failed or stalled, when its failure class
        implicates the weights or the GPUs, or when it fell back to a disk load. On a
        supervised unit a failed start is followed by at most one cold restart per run;
        after that systemd restarts the unit as usual."
      - "Progress lines, the result (C(restart_kind), C(restart_kind_reason),
        C(weight_cache)), run.json and the incident report say warm or cold and why."
    type: bool
  cold:
    description:
      - Make the first start of this run cold (the weight cache daemon restarted too), e.g.
        after an upgrade of SGLang or the model. No effect without the weight cache.
    type: bool
    default: false
  weight_cache_min_deliveries:
    description:
      - "Where the installed SGLang's weight cache daemon has a delivery budget (attaches one
        daemon generation serves, C(--weight-cache-max-deliveries); SGLang 0.5.23 has none and
        this does nothing), the budget is read with the daemon's C(--status) before each start
        and after a ready one (run.json C(weight_cache.delivery_budget_before) and C(_after),
        the metric C(sglang_weight_cache_deliveries_remaining) in O(metrics_dir)). With fewer
        deliveries left than this the next start is cold (C(delivery_budget_low)): the daemon
        restarts with a new budget before it refuses an engine. An exhausted budget makes the
        start cold at once (C(budget_exhausted)). V(0): only an exhausted budget does."
      - "The playbooks set it from the role variable C(sglang_service_weight_cache_min_deliveries),
        which also gives it to the unit's supervisor: the starts systemd makes (a reboot, a crash
        restarted) decide the same way."
    type: int
    default: 8
  observe_only_min_ceiling_s:
    description:
      - "Rule 4 of the detector (docs/detector.md): when the same verdict in the same phase ended
        the unit's last two starts, a restart did not help, and the next attempt runs observe-only:
        watched, never stopped by the detector; only a dead process or this ceiling ends it. The
        ceiling is the larger of this many seconds and O(observe_only_ceiling_factor) times the
        host's usual time to ready. restart.yml sets it from the sglang_service role's
        C(sglang_service_observe_only_min_ceiling_s), the value the unit's supervisor uses."
    type: float
    default: 1800
  observe_only_ceiling_factor:
    description:
      - The observe-only ceiling as a multiple of the host's usual time to ready (at least 1).
        restart.yml sets it from C(sglang_service_observe_only_ceiling_factor).
    type: float
    default: 3.0
  server:
    description:
      - "This host is one node of a server spread over several hosts (SGLang C(--nnodes)),
        restarted and watched as one. The task runs on every node in the same batch (one
        worker each: C(forks) at least the node count); the runs meet in the server's
        artifacts folder on the controller, C(<artifacts_dir>/<name>/<UTC time>/), which holds
        every node's run folder (C(<node>/run.json), traces, diagnostics)."
      - "Every node passes its preflight before any node is stopped; every node is stopped
        and its GPUs confirmed released before any is started; then all start together.
        Each node is watched (node 0 with a completion, the others by their logs, GPUs and
        health server); the first final verdict on any node decides the attempt for the
        server (C(attempt-<n>.json) names the node): a stall or failure on one node ends the
        attempt on all, every node captures its diagnostics, and the server is restarted as
        a whole or handed over. Only node 0 can call the server ready (a completion
        answered). A node whose verdict is C(stall_spin) (waiting in a collective, maybe for
        a peer stuck otherwise) lets the other nodes' verdicts come first for
        C(stall_idle_window_s - stall_spin_window_s) plus two polls. A node that gives up
        before the start (preflight, stop) makes every node give up, naming it."
      - A unit under the unit supervisor cannot be a node (it decides for one host only).
      - "Keys: C(name) (the server, usually its inventory group) and C(nodes) (its hosts in
        node-rank order). Empty: the host is a server of its own."
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description:
      - Observes once and reports what it would do; never stops or starts the unit.
      - "It makes the preflight decisions of a real run: a held unit, a restart lock held by
        another run, foreign GPU holders, leftovers without O(kill_orphans), options a
        supervised unit refuses and a supervised node of a server are each reported as
        C(would refuse: ...). On a supervised unit it says that the unit would be restarted
        once and its supervisor followed, and assesses with O(supervisor_detector)."
  diff_mode:
    support: none
    description: Returns no diff; the result and the artifacts say what changed.
  platform:
    support: full
    platforms: posix
    description: Targets with systemd; the restart loop runs on the controller.
notes:
  - Needs root on the target (become) to stop and start the unit and to read other processes.
  - Many hosts at once work (forks, serial); each host has its own loop, trace and artifacts.
seealso:
  - module: sglang_ops.serving.sglang_probe
  - module: ansible.builtin.reboot
"""

EXAMPLES = r"""
- name: Restart SGLang and watch it come up
  sglang_ops.serving.sglang_restart:
    unit: sglang-k26-ddtree
    port: 30001
    api_key_file: /etc/sglang/sglang-k26-ddtree.yaml
  register: restart

- name: Restart quickly on a small test host, killing leftovers from a crashed run
  sglang_ops.serving.sglang_restart:
    unit: sglang-test
    poll_s: 2
    kill_orphans: true
    detector:
      stall_idle_window_s: 60
"""

RETURN = r"""
outcome:
  description: ready, gave_up, interrupted or check_mode.
  returned: always
  type: str
verdict:
  description: The final verdict (ready, stalled, failed, preflight; observed in check mode).
  returned: always
  type: str
phase:
  description: Phase the last attempt was in (preflight or stopping when it never started).
  returned: always
  type: str
reason_code:
  description: Failure class code (plugins/module_utils/domain/failure_classes.py), or ready.
  returned: always
  type: str
reason:
  description: The detector's reason, in words.
  returned: always
  type: str
attempts:
  description: One entry per start (n, verdict, phase, reason_code, reason, t, polls, trace, diagnostics, action).
  returned: always
  type: list
  elements: dict
elapsed:
  description: Seconds the task took.
  returned: always
  type: float
artifacts:
  description: Controller path of this run's artifacts folder.
  returned: always
  type: str
run_json:
  description: Controller path of run.json.
  returned: always
  type: str
gave_up_because:
  description: Why no further restart was tried (same failure twice, a class a restart cannot fix, attempts exhausted).
  returned: when it gave up
  type: str
missing_node:
  description:
    - The node of a server over several hosts that never joined the rendezvous (reason code C(peer_missing)),
      with its inventory host where the run knows the server's nodes, e.g. C(node 0 (gpu-a1)).
  returned: when it gave up with peer_missing
  type: str
report:
  description: Controller paths of the incident report (markdown, json, chart), or null when it could not be written.
  returned: when it gave up
  type: dict
report_error:
  description: Why the incident report could not be written (the exception, its writer's import included).
  returned: when it gave up and the report could not be written
  type: str
would:
  description: What a real run would do.
  returned: in check mode
  type: str
assessment:
  description: The detector's assessment of the one observation.
  returned: in check mode
  type: dict
"""
