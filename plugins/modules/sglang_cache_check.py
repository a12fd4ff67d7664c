#!/usr/bin/python
# Copyright: sglang-ops maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Check that SGLang's JIT and kernel cache directories survive restarts."""

DOCUMENTATION = r"""
module: sglang_cache_check
short_description: Check SGLang JIT/kernel cache directories are persistent and owned by the service user
description:
  - For each cache directory (SGLANG_CACHE_DIR, SGLANG_DG_CACHE_DIR, ...) checks that it
    exists, is a directory owned and writable by the service user, and lives on
    persistent storage (not tmpfs or ramfs), and reports its size and file count.
  - A cache that does not survive makes every restart compile Triton, Inductor, CUDA,
    FlashInfer and DeepGEMM kernels again, minutes to half an hour.
  - Changes nothing on the host.
version_added: "0.1.0"
options:
  dirs:
    description: Cache directories to check, keyed by a name shown in the report (usually the environment variable that points at it).
    type: dict
    required: true
  owner:
    description: The user the SGLang service runs as.
    type: str
    required: true
  fail_on_problem:
    description: Fail the task when a directory has a problem (otherwise only report it).
    type: bool
    default: true
notes:
  - Supports check mode (the module only reads).
author:
  - sglang-ops maintainers (@sglang-ops)
"""

EXAMPLES = r"""
- name: Check the JIT caches survive restarts
  sglang_ops.serving.sglang_cache_check:
    owner: sglang
    dirs:
      SGLANG_CACHE_DIR: /var/cache/sglang
      SGLANG_DG_CACHE_DIR: /var/cache/sglang/0.5.23/deep_gemm
"""

RETURN = r"""
caches:
  description: One entry per directory with name, path, ok, problems, notes, exists, owner, fstype, mount_point, size_bytes, files.
  returned: always
  type: list
  elements: dict
problems:
  description: Every problem found, in words.
  returned: always
  type: list
  elements: str
total_size_bytes:
  description: Sum of the sizes of the directories that exist.
  returned: always
  type: int
msg:
  description: One-line summary.
  returned: always
  type: str
"""

import os
import pwd

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import cache_persistence as cp


def _user_name(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _nearest_existing(path):
    while not os.path.exists(path) and path != "/":
        path = os.path.dirname(path)
    return path


def gather(name, path, mounts):
    path = os.path.abspath(path)
    where = os.path.realpath(_nearest_existing(path))
    mount = cp.mount_of(where, mounts)
    if not os.path.exists(path):
        return cp.CacheDirFacts(name, path, False, mount=mount)
    st = os.stat(path)
    is_dir = os.path.isdir(path)
    size, files = cp.tree_size(path) if is_dir else (0, 0)
    return cp.CacheDirFacts(name, path, True, is_dir, _user_name(st.st_uid),
                            bool(st.st_mode & 0o200), mount, size, files)


def main():
    module = AnsibleModule(
        argument_spec={
            "dirs": {"type": "dict", "required": True},
            "owner": {"type": "str", "required": True},
            "fail_on_problem": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        mounts = cp.parse_mountinfo(fh.read())
    caches, problems, total = [], [], 0
    for name, path in sorted(module.params["dirs"].items()):
        if not isinstance(path, str) or not path.startswith("/"):
            module.fail_json(msg="dirs.%s must be an absolute path, got %r" % (name, path))
        facts = gather(name, path, mounts)
        verdict = cp.judge(facts, module.params["owner"])
        entry = verdict.to_dict()
        entry.update(exists=facts.exists, owner=facts.owner, fstype=facts.mount.fstype,
                     mount_point=facts.mount.mount_point, size_bytes=facts.size_bytes,
                     files=facts.files)
        caches.append(entry)
        problems.extend(verdict.problems)
        total += facts.size_bytes
    if problems:
        msg = "cache directories that will not survive a restart: " + "; ".join(problems)
    else:
        msg = "%d cache directories persistent and owned by %s, %.1f MiB cached" % (
            len(caches), module.params["owner"], total / 2**20)
    result = {"changed": False, "caches": caches, "problems": problems,
              "total_size_bytes": total, "msg": msg}
    if problems and module.params["fail_on_problem"]:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
