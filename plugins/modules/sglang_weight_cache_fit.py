#!/usr/bin/python
# Copyright: sglang-ops maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Whether SGLang's weight cache daemon can hold a model's weights."""

DOCUMENTATION = r"""
module: sglang_weight_cache_fit
short_description: Whether SGLang's weight cache daemon can hold a model's weights
description:
  - Reads the model folder's C(config.json) (C(quantization_config)) and a C(--quantization)
    among I(server_flags), the quantization method SGLang will use, and asks the installed
    SGLang (I(python)'s C(sglang.srt.weight_cache.protocol.is_ipc_quant_supported)) whether its
    weight cache daemon and client share that method over CUDA IPC.
  - When that SGLang does not import (no venv yet, a release without the weight cache), the
    allowlist of the pinned release answers (SGLang 0.5.23's C(IPC_QUANT_ALLOWLIST), which holds
    unquantized and block-wise FP8 only).
  - Reads only; runs the same in check mode.
version_added: "0.1.0"
options:
  model_path:
    description: The model folder (its C(config.json) is read; missing means unquantized).
    type: path
    required: true
  python:
    description: The Python of the venv that runs SGLang.
    type: path
    required: true
  server_flags:
    description: The server's extra flags, flat (a C(--quantization) among them wins over C(config.json)).
    type: list
    elements: str
    default: []
author:
  - sglang-ops maintainers (@sglang-ops)
"""

EXAMPLES = r"""
- name: Ask whether the weight cache can hold the model
  sglang_ops.serving.sglang_weight_cache_fit:
    model_path: /models/Kimi-K2.6
    python: /opt/sglang/venv/bin/python
    server_flags: ["--kv-cache-dtype", "fp8_e4m3"]
  register: fit
"""

RETURN = r"""
supported:
  description: Whether SGLang's weight cache can hold this model's weights.
  type: bool
  returned: always
quant_method:
  description: The quantization method SGLang resolves ("" for unquantized).
  type: str
  returned: always
quant_method_from:
  description: Where the method came from (C(--quantization) or C(config.json)).
  type: str
  returned: always
accepted:
  description: What the asked SGLang accepts, in words.
  type: str
  returned: always
asked:
  description: Who answered, e.g. "SGLang 0.5.23 of /opt/sglang/venv/bin/python" or "the allowlist of SGLang 0.5.23 (pinned)".
  type: str
  returned: always
msg:
  description: One line saying what was found.
  type: str
  returned: always
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import weight_cache

# Run by the venv's Python (-I): its SGLang's own predicate and allowlist, as JSON.
_ASK_SGLANG = (
    "import json, sys\n"
    "import sglang\n"
    "from sglang.srt.weight_cache import protocol\n"
    "method, config = sys.argv[1], json.loads(sys.argv[2])\n"
    "allow = getattr(protocol, 'IPC_QUANT_ALLOWLIST', {})\n"
    "print(json.dumps({'supported': bool(protocol.is_ipc_quant_supported(method, config)),\n"
    "                  'methods': [str(m) for m in allow], 'version': getattr(sglang, '__version__', '?')}))\n"
)


def read_model_config(model_path):
    """config.json of the model folder as a dict, None when missing or unreadable."""
    try:
        with open(os.path.join(model_path, "config.json"), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def ask_sglang(module, python, method, quant_config):
    """The venv SGLang's answer as a dict, or None when it cannot be asked."""
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        return None
    rc, out, _err = module.run_command([python, "-I", "-c", _ASK_SGLANG, method, json.dumps(quant_config)])
    if rc != 0:
        return None
    try:
        return json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            model_path=dict(type="path", required=True),
            python=dict(type="path", required=True),
            server_flags=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    model_config = read_model_config(p["model_path"])
    method, quant_config, method_from = weight_cache.quant_method_of(p["server_flags"], model_config)
    if model_config is None and method_from != weight_cache.QUANTIZATION_FLAG:
        method_from = "no readable config.json in %s: taken as unquantized" % p["model_path"]
    answer = ask_sglang(module, p["python"], method, quant_config)
    if answer is not None:
        supported = bool(answer.get("supported"))
        # The installed release's list; its field conditions are its own (it answered for this model).
        accepted = ", ".join(weight_cache.method_words(m) for m in answer.get("methods") or ())
        if set(answer.get("methods") or ()) == set(weight_cache.PINNED_IPC_QUANT_ALLOWLIST):
            accepted = weight_cache.accepted_words(weight_cache.PINNED_IPC_QUANT_ALLOWLIST)
        asked = "SGLang %s of %s" % (answer.get("version"), p["python"])
    else:
        supported = weight_cache.pinned_ipc_quant_supported(method, quant_config)
        accepted = weight_cache.accepted_words(weight_cache.PINNED_IPC_QUANT_ALLOWLIST)
        asked = "the allowlist of SGLang %s (pinned; %s does not import it)" % (
            weight_cache.PINNED_SGLANG_VERSION, p["python"])
    msg = "quantization %s (from %s): %s by %s, which accepts %s" % (
        weight_cache.method_words(method), method_from, "accepted" if supported else "refused", asked, accepted)
    module.exit_json(changed=False, supported=supported, quant_method=method, quant_method_from=method_from,
                     accepted=accepted, asked=asked, msg=msg)


if __name__ == "__main__":
    main()
