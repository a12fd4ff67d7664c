# Copyright: sglang-ops maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
# Controller side of sglang_ops.serving.sglang_file_tree (documented in
# plugins/modules/sglang_file_tree.py): reads the files of src that match include and runs
# the module once on the host with their content, where ansible.builtin.copy over a folder
# runs a stat and a copy per file.
import base64
import fnmatch
import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.sglang_ops.serving.plugins.module_utils.host.file_tree import PYCACHE
from ansible_collections.sglang_ops.serving.plugins.modules.sglang_file_tree import ARGUMENT_SPEC


def read_tree(src, include):
    """{path relative to src: base64 content} of the files under src matching an include
    pattern, __pycache__ folders left out."""
    files = {}
    for top, dirs, names in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d != PYCACHE)
        for name in sorted(names):
            path = os.path.join(top, name)
            rel = os.path.relpath(path, src).replace(os.sep, "/")
            if any(fnmatch.fnmatchcase(rel, pattern) for pattern in include):
                with open(path, "rb") as f:
                    files[rel] = base64.b64encode(f.read()).decode("ascii")
    return files


class ActionModule(ActionBase):
    TRANSFERS_FILES = False      # the content travels in the module's arguments

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        spec = {k: v for k, v in ARGUMENT_SPEC.items() if k != "files"}
        dummy, args = self.validate_argument_spec(argument_spec=spec)
        src = self._find_needle("files", args["src"])
        if not os.path.isdir(src):
            raise AnsibleActionFail("sglang_file_tree: src %s is not a folder" % src)
        files = read_tree(src, args["include"])
        if not files:
            raise AnsibleActionFail("sglang_file_tree: no file under %s matches include %s" % (src, args["include"]))
        module_args = dict(args, src=src, files=files)
        outcome = self._execute_module(module_name="sglang_ops.serving.sglang_file_tree", module_args=module_args,
                                       task_vars=task_vars)
        outcome.pop("invocation", None)          # the files' content, once per host, is no log line
        result.update(outcome)
        return result
