#!/usr/bin/python
# Copyright: sglang-ops maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Put a folder of the controller on the host in one module run."""

DOCUMENTATION = r"""
module: sglang_file_tree
short_description: Put a folder of the controller on the host in one module run
description:
  - Puts the files of a folder on the controller (O(src), those matching O(include)) under
    O(dest) on the host. A file whose content differs, or that is missing, is written to a
    temporary file beside it and renamed into place; a link or another kind of file in its
    place is replaced, never followed. Owner, group and mode are set on every file and on
    the folders it creates.
  - With O(prune=true), what is under O(dest) and not in the folder goes, files and folders,
    so the host holds one copy of each file and nothing an earlier release shipped. Python's
    C(__pycache__) folders inside kept folders are left to Python.
  - The action plugin reads O(src) on the controller and sends its files with the module's
    arguments, so a folder of a hundred files is one module run per host, where
    M(ansible.builtin.copy) over a folder runs a stat and a copy per file.
version_added: "0.1.0"
options:
  src:
    description: The folder on the controller (a role's C(files/) is searched for a relative path).
    type: path
    required: true
  include:
    description:
      - Shell patterns matched against each file's path relative to O(src) (C(*) matches
        across C(/) too); a file matching none is not sent. C(__pycache__) folders are never sent.
    type: list
    elements: str
    default: ["*"]
  dest:
    description: The folder on the host; created when missing.
    type: path
    required: true
  prune:
    description: Remove what is under O(dest) and not among the files sent.
    type: bool
    default: false
  owner:
    description: Owner of the files and of the folders created.
    type: str
  group:
    description: Group of the files and of the folders created.
    type: str
  mode:
    description: Mode of the files.
    type: raw
    default: "0644"
  dir_mode:
    description: Mode of the folders created.
    type: raw
    default: "0755"
  files:
    description: Set by the action plugin from O(src) and O(include) (relative path to base64 content); not set by hand.
    type: dict
notes:
  - Supports check mode (says what it would write and remove) and diff mode (the paths written and removed).
author:
  - sglang-ops maintainers (@sglang-ops)
"""

EXAMPLES = r"""
- name: Install the collection's module_utils for the supervisor
  sglang_ops.serving.sglang_file_tree:
    src: "{{ role_path }}/../../plugins/module_utils"
    include: [domain/*.py, records/*.py, host/*.py, services/*.py]
    dest: /usr/local/lib/sglang-ops/ansible_collections/sglang_ops/serving/plugins/module_utils
    prune: true
    owner: root
    group: root
    mode: "0644"
"""

RETURN = r"""
written:
  description: Paths relative to O(dest) written (or, in check mode, that would be).
  returned: always
  type: list
  elements: str
removed:
  description: Paths under O(dest) removed by O(prune) (or, in check mode, that would be).
  returned: always
  type: list
  elements: str
files:
  description: Number of files sent.
  returned: always
  type: int
msg:
  description: One-line summary.
  returned: always
  type: str
"""

import base64
import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang_ops.serving.plugins.module_utils.host.file_tree import TreeError, plan_tree

ARGUMENT_SPEC = dict(
    src=dict(type="path", required=True),
    include=dict(type="list", elements="str", default=["*"]),
    dest=dict(type="path", required=True),
    prune=dict(type="bool", default=False),
    owner=dict(type="str"),
    group=dict(type="str"),
    mode=dict(type="raw", default="0644"),
    dir_mode=dict(type="raw", default="0755"),
    files=dict(type="dict"),
)


def _attributes(module, path, mode, changed):
    p = module.params
    changed = module.set_owner_if_different(path, p["owner"], changed)
    changed = module.set_group_if_different(path, p["group"], changed)
    return module.set_mode_if_different(path, mode, changed)


def _make_folders(module, folder):
    """Create `folder` and its missing parents with dir_mode, owner, group."""
    missing = []
    while not os.path.isdir(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    for path in reversed(missing):
        os.mkdir(path)
        _attributes(module, path, module.params["dir_mode"], True)


def _write(module, dest, rel, content):
    target = os.path.join(dest, rel)
    _make_folders(module, os.path.dirname(target))
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".%s." % os.path.basename(target))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        module.atomic_move(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    p = module.params
    if p["files"] is None:
        module.fail_json(msg="sglang_file_tree runs through its action plugin, which sends the files of src")
    dest = os.path.abspath(p["dest"])
    try:
        files = {rel: base64.b64decode(content) for rel, content in p["files"].items()}
        plan = plan_tree(dest, files, prune=p["prune"])
    except (TreeError, TypeError, ValueError) as e:
        module.fail_json(msg="sglang_file_tree: %s" % e)
    changed = bool(plan.write or plan.remove)
    if not module.check_mode:
        _make_folders(module, dest)
        for rel in plan.write:
            _write(module, dest, rel, files[rel])
        for path in plan.remove:
            _remove(path)
    to_write = set(plan.write)
    for rel in sorted(files):
        if not (module.check_mode and rel in to_write):       # in check mode, only what is there
            changed = _attributes(module, os.path.join(dest, rel), p["mode"], changed)
    removed = [os.path.relpath(path, dest) for path in plan.remove]
    result = dict(changed=changed, written=plan.write, removed=removed, files=len(files),
                  msg="%d of %d files written, %d removed under %s" % (len(plan.write), len(files), len(removed), dest))
    if module._diff:
        result["diff"] = dict(before_header=dest, after_header=dest,
                              before="".join("%s\n" % rel for rel in removed),
                              after="".join("%s\n" % rel for rel in plan.write))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
