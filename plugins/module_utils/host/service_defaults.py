"""What the sglang_service role installs when the inventory says nothing else
(roles/sglang_service/defaults/main.yml), for the code that must agree with it without
reading the role: the restart action's defaults, the unit supervisor's settings and the
CLI. tests/unit/test_service_defaults.py holds the role, its argument specs and the
module documentation to these values.
"""

UNIT_NAME = "sglang-k26-ddtree"     # sglang_service_unit_name
PORT = 30001                        # sglang_service_port
CONFIG_DIR = "/etc/sglang"          # sglang_service_config_dir: the server's --config file is <unit>.yaml there
# sglang_service_timeout_stop_s, the unit's TimeoutStopSec=: seconds after SIGTERM before
# systemd sends SIGKILL to every process of the unit.
TIMEOUT_STOP_S = 120
# The restart waits this much longer than TimeoutStopSec= for `systemctl stop` to return
# (systemd's SIGKILL and the processes' exit) before it sends SIGKILL itself.
STOP_WAIT_MARGIN_S = 30
STOP_TIMEOUT_S = float(TIMEOUT_STOP_S + STOP_WAIT_MARGIN_S)


def base_url(port=PORT, host="127.0.0.1"):
    """The server's OpenAI API on the host: 'http://127.0.0.1:30001'."""
    return "http://%s:%d" % (host, port)


def api_key_file(unit=UNIT_NAME, config_dir=CONFIG_DIR):
    """The server's --config file the role writes (its api-key line): /etc/sglang/<unit>.yaml."""
    return "%s/%s.yaml" % (config_dir.rstrip("/"), unit)
