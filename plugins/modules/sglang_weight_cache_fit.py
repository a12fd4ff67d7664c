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
  - When that SGLang cannot answer (no venv yet, a release without the weight cache, an import
    that fails or hangs, say on a broken CUDA install, past I(ask_timeout_s)), the allowlist of the
    pinned release answers (SGLang 0.5.23's C(IPC_QUANT_ALLOWLIST), which holds unquantized and
    block-wise FP8 only); a venv Python that failed or hung is a warning naming what answered
    instead and why.
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
  ask_timeout_s:
    description:
      - Seconds the venv's Python may take to import SGLang and answer; past them it is killed
        (with every process it started) and the pinned allowlist answers.
    type: float
    default: 60
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
  description: >-
    Who answered, e.g. "SGLang 0.5.23 of /opt/sglang/venv/bin/python", or "the allowlist of SGLang
    0.5.23 (pinned; ...)" with why the venv's SGLang did not answer.
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
from ansible_collections.sglang_ops.serving.plugins.module_utils.host.bounded_run import bounded_run

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
DEFAULT_ASK_TIMEOUT_S = 60.0


def read_model_config(model_path):
    """config.json of the model folder as a dict, None when missing or unreadable."""
    try:
        with open(os.path.join(model_path, "config.json"), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def ask_sglang(python, method, quant_config, timeout_s):
    """(the venv SGLang's answer as a dict, None) or (None, why it could not answer, None when
    the venv has no Python yet, which is no fault: preflight runs before the install)."""
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        return None, None
    res = bounded_run([python, "-I", "-c", _ASK_SGLANG, method, json.dumps(quant_config)], timeout_s)
    if res.timed_out:
        return None, "%s did not answer within ask_timeout_s=%g s (killed)" % (python, timeout_s)
    if res.rc != 0:
        last = (res.stderr.strip().splitlines() or ["exit status %s" % res.rc])[-1]
        return None, "%s could not ask its SGLang: %s" % (python, last[-300:])
    try:
        answer = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None, "%s printed no answer: %r" % (python, res.stdout[-200:])
    return (answer, None) if isinstance(answer, dict) else (None, "%s printed no answer" % python)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            model_path=dict(type="path", required=True),
            python=dict(type="path", required=True),
            server_flags=dict(type="list", elements="str", default=[]),
            ask_timeout_s=dict(type="float", default=DEFAULT_ASK_TIMEOUT_S),
        ),
        supports_check_mode=True,
    )
    p = module.params
    model_config = read_model_config(p["model_path"])
    method, quant_config, method_from = weight_cache.quant_method_of(p["server_flags"], model_config)
    if model_config is None and method_from != weight_cache.QUANTIZATION_FLAG:
        method_from = "no readable config.json in %s: taken as unquantized" % p["model_path"]
    if p["ask_timeout_s"] <= 0:
        module.fail_json(msg="ask_timeout_s must be > 0, got %g" % p["ask_timeout_s"])
    answer, why_not = ask_sglang(p["python"], method, quant_config, p["ask_timeout_s"])
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
        asked = "the allowlist of SGLang %s (pinned; %s)" % (
            weight_cache.PINNED_SGLANG_VERSION, why_not or "%s is not installed yet" % p["python"])
        if why_not:
            module.warn("the venv's SGLang did not answer, so %s answered for quantization %s" % (
                asked, weight_cache.method_words(method)))
    msg = "quantization %s (from %s): %s by %s, which accepts %s" % (
        weight_cache.method_words(method), method_from, "accepted" if supported else "refused", asked, accepted)
    module.exit_json(changed=False, supported=supported, quant_method=method, quant_method_from=method_from,
                     accepted=accepted, asked=asked, msg=msg)


if __name__ == "__main__":
    main()
