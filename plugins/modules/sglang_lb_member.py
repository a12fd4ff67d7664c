#!/usr/bin/python
# Copyright: sglang-ops maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""A replica's place in an HAProxy backend: drain it before a restart, put it back after."""

DOCUMENTATION = r"""
module: sglang_lb_member
short_description: Drain an SGLang replica in HAProxy, put it back, or read its state
description:
  - Talks to the HAProxy runtime API (the C(stats socket) of HAProxy's global section, at
    C(level admin)) on the host it runs on, usually the load balancer (C(delegate_to)).
  - With I(state), puts the server in that state with C(set server BACKEND/SERVER state STATE)
    unless it is already there; without I(state), only reads.
  - C(drain) stops new sessions to the server while those it has finish; C(ready) takes new
    sessions again; C(maint) takes it out altogether.
  - The state is read with C(show servers state) (the admin flags that C(set server) forces)
    and C(show stat) (HAProxy's status text and the current sessions), each parsed by its
    header line.
  - Changes something only when the state differs; check mode is supported and then only reads.
  - An unknown backend or server, an unreachable socket or a socket without C(level admin)
    fails with one line naming it.
version_added: "0.2.0"
options:
  socket:
    description:
      - The runtime API, a unix socket path (C(/run/haproxy/admin.sock)) or C(HOST:PORT) of a
        TCP stats socket (C([ADDR]:PORT) for IPv6).
    type: str
    required: true
  backend:
    description: The HAProxy backend the replica is a server of.
    type: str
    required: true
  server:
    description: The server's name in that backend.
    type: str
    required: true
  state:
    description: The state to put the server in; leave it out to read the state only.
    type: str
    choices: [ready, drain, maint]
  timeout_s:
    description: Limit for each runtime API command.
    type: float
    default: 5.0
author:
  - sglang-ops maintainers (@sglang-ops)
"""

EXAMPLES = r"""
- name: Drain this replica on the load balancer
  sglang_ops.serving.sglang_lb_member:
    socket: /run/haproxy/admin.sock
    backend: sglang
    server: "{{ inventory_hostname }}"
    state: drain
  delegate_to: lb1

- name: Back in the load balancer
  sglang_ops.serving.sglang_lb_member:
    socket: 10.0.0.5:9999
    backend: sglang
    server: gpu-07
    state: ready

- name: Where it stands, and how many sessions it still has
  sglang_ops.serving.sglang_lb_member:
    socket: /run/haproxy/admin.sock
    backend: sglang
    server: gpu-07
  register: member
"""

RETURN = r"""
state:
  description: The server's state afterwards (in check mode, the one it would have), from its forced admin flags.
  returned: always
  type: str
  choices: [ready, drain, maint]
  sample: drain
previous_state:
  description: The server's state before.
  returned: always
  type: str
  sample: ready
status:
  description: HAProxy's status text of the server (C(show stat)), e.g. C(UP), C(DRAIN), C(MAINT), C(DOWN), C(no check).
  returned: always
  type: str
  sample: DRAIN
sessions:
  description: The server's current sessions (C(scur) of C(show stat)).
  returned: always
  type: int
  sample: 2
queued:
  description: Requests queued in HAProxy for the server (C(qcur) of C(show stat)).
  returned: always
  type: int
  sample: 0
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import haproxy_runtime

ARGUMENT_SPEC = dict(
    socket=dict(type="str", required=True),
    backend=dict(type="str", required=True),
    server=dict(type="str", required=True),
    state=dict(type="str", choices=list(haproxy_runtime.STATES)),
    timeout_s=dict(type="float", default=5.0),
)


def run(params, check_mode):
    """The module's result for these parameters; raises RuntimeApiError."""
    address, backend, server = params["socket"], params["backend"], params["server"]
    if params["state"] is None:
        current = haproxy_runtime.server_state(address, backend, server, params["timeout_s"])
        return dict(current, changed=False, previous_state=current["state"])
    return haproxy_runtime.set_server_state(address, backend, server, params["state"], check_mode,
                                            params["timeout_s"])


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    if module.params["timeout_s"] <= 0:
        module.fail_json(msg="timeout_s must be positive, got %s" % module.params["timeout_s"])
    try:
        result = run(module.params, module.check_mode)
    except haproxy_runtime.RuntimeApiError as e:
        module.fail_json(msg=str(e))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
