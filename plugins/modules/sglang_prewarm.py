#!/usr/bin/python
# Copyright: sglang-ops maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Read a model's weight files into the page cache before a restart."""

DOCUMENTATION = r"""
module: sglang_prewarm
short_description: Read SGLang model weights into the page cache before a restart
description:
  - Measures how much of the model's weight files is in the page cache (mincore, like
    C(fincore)) and how much memory the host has available, decides whether reading the
    rest fits, and if so reads it with several threads and large sequential reads while
    the running server keeps serving. The next start then loads from memory instead of
    disk.
  - Parts already resident are not read again, so the module can be called repeatedly
    with a small I(max_duration_s) to drive a progress display; each call continues where
    the previous one stopped.
  - With I(evict=true) it drops the files from the page cache instead (posix_fadvise
    DONTNEED; no privileges needed beyond reading the files). Used to measure a cold start.
  - Residency is exact when the module runs as root or as the owner of the files; for
    other users the kernel under-reports it (see RV(residency_trusted)).
version_added: "0.1.0"
options:
  model_path:
    description: Model directory (or a single file) whose weight files to read.
    type: path
    required: true
  extra_paths:
    description: More directories or files to read, such as a speculative draft model.
    type: list
    elements: path
    default: []
  include:
    description: File name patterns that count as weight files.
    type: list
    elements: str
    default: ["*.safetensors", "*.bin", "*.pt", "*.pth", "*.gguf"]
  mode:
    description:
      - C(off) reads nothing. C(auto) reads only when the part of the model not yet in
        the page cache fits in available memory with I(reserve_gib) kept free. C(on)
        reads even when it does not fit (the earliest pages read will be evicted again).
    type: str
    choices: [auto, "on", "off"]
    default: auto
  reserve_gib:
    description:
      - Memory (GiB) that must stay available after the model is resident, for the
        new server's host memory while it loads and for everything else on the host.
    type: float
    default: 16
  threads:
    description: Reader threads. Several streams keep NVMe and network storage busy; use 1-2 for spinning disks.
    type: int
    default: 8
  read_block_mib:
    description: Size of each read (MiB).
    type: int
    default: 16
  max_duration_s:
    description: Stop taking new segments after this many seconds (0 means no limit). RV(done) says whether all was read.
    type: float
    default: 0
  evict:
    description: Drop the files from the page cache instead of reading them (I(mode) is not applied).
    type: bool
    default: false
notes:
  - Check mode measures and reports the decision without reading or evicting.
  - Supports check mode.
author:
  - sglang-ops maintainers (@sglang-ops)
"""

EXAMPLES = r"""
- name: Warm the page cache with the model before stopping the server
  sglang_ops.serving.sglang_prewarm:
    model_path: /models/Kimi-K2.6
    mode: auto
    reserve_gib: 64
    threads: 16
  register: prewarm

- name: Say what was decided
  ansible.builtin.debug:
    msg: "{{ prewarm.msg }}"

- name: Drop the model from the page cache (cold-start measurement)
  sglang_ops.serving.sglang_prewarm:
    model_path: /models/Kimi-K2.6
    evict: true
"""

RETURN = r"""
msg:
  description: One line saying what was decided and done.
  returned: always
  type: str
decision:
  description: The decision (prewarm, code, words, missing_bytes, room_bytes). Codes are off, no_files, already_resident, fits, does_not_fit, forced, evict.
  returned: always
  type: dict
files:
  description: Number of weight files found.
  returned: always
  type: int
model_bytes:
  description: Total size of the weight files.
  returned: always
  type: int
mem_available_bytes:
  description: MemAvailable from /proc/meminfo when the decision was made.
  returned: always
  type: int
resident_bytes_before:
  description: Bytes of the weight files in the page cache before reading.
  returned: always
  type: int
resident_fraction_before:
  description: resident_bytes_before / model_bytes.
  returned: always
  type: float
resident_bytes_after:
  description: Bytes in the page cache afterwards (equal to before in check mode).
  returned: always
  type: int
resident_fraction_after:
  description: resident_bytes_after / model_bytes.
  returned: always
  type: float
read_bytes:
  description: Bytes read from the files by this call.
  returned: always
  type: int
skipped_bytes:
  description: Bytes found already resident and not read again.
  returned: always
  type: int
read_s:
  description: Seconds spent reading (or evicting).
  returned: always
  type: float
read_bytes_per_s:
  description: read_bytes / read_s.
  returned: always
  type: float
done:
  description: True when nothing is left to do (everything read, or nothing to read by decision).
  returned: always
  type: bool
residency_trusted:
  description: False when the kernel may under-report residency because the module is neither root nor the files' owner.
  returned: always
  type: bool
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import page_cache
from ansible_collections.sglang_ops.serving.plugins.module_utils.host import prewarm_decision
from ansible_collections.sglang_ops.serving.plugins.module_utils.host import prewarm_reader


def _mem_available_bytes():
    with open("/proc/meminfo", encoding="ascii") as fh:
        return page_cache.read_mem_available_bytes(fh.read())


def _summary(result, check_mode):
    words = result["decision"]["words"]
    if check_mode:
        return "%s; check mode: nothing read or evicted" % words
    resident = "resident %.0f%% -> %.0f%%" % (100 * result["resident_fraction_before"],
                                              100 * result["resident_fraction_after"])
    if result["decision"]["code"] == "evict":
        return "%s; %s in %.1f s" % (words, resident, result["read_s"])
    if not result["decision"]["prewarm"]:
        return words
    return "%s; %s, read %.1f GB in %.1f s (%.2f GB/s)%s" % (
        words, resident, result["read_bytes"] / 1e9, result["read_s"],
        result["read_bytes_per_s"] / 1e9, "" if result["done"] else "; time budget reached, not done")


def run(params, check_mode):
    files = prewarm_reader.model_files([params["model_path"]] + params["extra_paths"],
                                       params["include"])
    before = page_cache.files_residency(files)
    mem_available = _mem_available_bytes()
    if params["evict"]:
        decision = prewarm_decision.PrewarmDecision(
            False, "evict", "evict: drop %d files (%s) from the page cache"
            % (len(files), prewarm_decision.gib(before.size_bytes)),
            before.size_bytes - before.resident_bytes, 0)
    else:
        decision = prewarm_decision.decide(params["mode"], mem_available, before.size_bytes,
                                           before.resident_bytes,
                                           int(params["reserve_gib"] * 2**30))
    result = {
        "changed": False, "decision": decision.to_dict(), "files": len(files),
        "model_bytes": before.size_bytes, "mem_available_bytes": mem_available,
        "resident_bytes_before": before.resident_bytes,
        "resident_fraction_before": round(before.fraction, 4),
        "read_bytes": 0, "skipped_bytes": 0, "read_s": 0.0, "read_bytes_per_s": 0.0,
        "done": not decision.prewarm,
        "residency_trusted": all(page_cache.residency_is_trusted(f) for f in files),
    }
    after = before
    if params["evict"] and not check_mode:
        start = time.monotonic()
        for path in files:
            page_cache.evict_file(path)
        result["read_s"] = round(time.monotonic() - start, 3)
        after = page_cache.files_residency(files)
        result["changed"] = before.resident_bytes > 0
        result["done"] = True
    elif decision.prewarm and not check_mode:
        stats = prewarm_reader.warm(files, threads=params["threads"],
                                    read_block_bytes=params["read_block_mib"] << 20,
                                    max_duration_s=params["max_duration_s"])
        after = page_cache.files_residency(files)
        result.update(read_bytes=stats.read_bytes, skipped_bytes=stats.skipped_bytes,
                      read_s=round(stats.read_s, 3),
                      read_bytes_per_s=round(stats.read_bytes_per_s, 1),
                      done=stats.segments_left == 0, changed=stats.read_bytes > 0)
    result["resident_bytes_after"] = after.resident_bytes
    result["resident_fraction_after"] = round(after.fraction, 4)
    result["msg"] = _summary(result, check_mode)
    return result


def main():
    module = AnsibleModule(
        argument_spec={
            "model_path": {"type": "path", "required": True},
            "extra_paths": {"type": "list", "elements": "path", "default": []},
            "include": {"type": "list", "elements": "str",
                        "default": list(prewarm_reader.DEFAULT_INCLUDE)},
            "mode": {"type": "str", "choices": ["auto", "on", "off"], "default": "auto"},
            "reserve_gib": {"type": "float", "default": 16},
            "threads": {"type": "int", "default": 8},
            "read_block_mib": {"type": "int", "default": 16},
            "max_duration_s": {"type": "float", "default": 0},
            "evict": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    p = module.params
    if p["threads"] < 1 or p["read_block_mib"] < 1 or p["reserve_gib"] < 0 or p["max_duration_s"] < 0:
        module.fail_json(msg="threads and read_block_mib must be >= 1; reserve_gib and "
                             "max_duration_s must be >= 0")
    try:
        result = run(p, module.check_mode)
    except (OSError, ValueError) as exc:
        module.fail_json(msg="prewarm of %s failed: %s" % (p["model_path"], exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
