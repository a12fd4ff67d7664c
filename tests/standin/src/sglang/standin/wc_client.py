"""The engine side of the weight cache in the SGLang stand-in (test double): what
SGLang 0.5.23's IpcModelLoader does with `--weight-cache-mode client`
(sglang/srt/weight_cache/ipc_loader.py).

Only a missing socket file means "no daemon" (fall back to a disk load); a socket that
is not ours, a refused connection or a config mismatch is an error that ends the start.
"""
import os
import socket
import stat
import threading
import time

from sglang.srt.weight_cache import protocol

DAEMON_LIVENESS_POLL_INTERVAL_S = 5.0
# Where SGLang raises, for the traceback's last frame.
IPC_LOADER = "/opt/sglang/venvs/0.5.23/lib/python3.11/site-packages/sglang/srt/weight_cache/ipc_loader.py"


def fetch_from_cache(socket_path, engine_config, log):
    """The daemon's answer to fetch_state, or None when its socket file does not exist."""
    try:
        st = os.lstat(socket_path)
    except FileNotFoundError:
        log(f"[IpcModelLoader] Daemon socket not found at {socket_path}.")
        return None
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid():
        raise RuntimeError(f"[IpcModelLoader] Refusing to connect: {socket_path} is not "
                           f"a socket owned by this user.")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(30)
        sock.connect(socket_path)
    except FileNotFoundError:
        sock.close()
        return None
    except ConnectionRefusedError:
        sock.close()
        raise RuntimeError(f"[IpcModelLoader] Daemon socket exists at {socket_path} but "
                           f"refused the connection. The daemon may have crashed after "
                           f"creating the socket. Check daemon logs.") from None
    except OSError as e:
        sock.close()
        raise RuntimeError(f"[IpcModelLoader] Failed to connect to daemon at {socket_path}: {e}") from e
    try:
        c = engine_config
        log(f"[IpcModelLoader] Requesting weights from daemon at {socket_path} with config: "
            f"model={c['model_path']}, arch={c['model_arch']}, tp={c['tp_size']}/{c['tp_rank']}, "
            f"quant={c['quant_method']}, dtype={c['dtype']}")
        protocol.send_msg(sock, {"type": "fetch_state", "config": engine_config})
        result = protocol.recv_msg(sock)
        if result.get("status") == "budget_exhausted":
            raise RuntimeError(f"[IpcModelLoader] Weight cache daemon at {socket_path} answered budget_exhausted: "
                               f"{result.get('reserved')} of {result.get('max_deliveries')} deliveries of this "
                               f"daemon generation are spent. Drain the engines and restart the daemon.")
        if result.get("status") != "ok":
            raise RuntimeError(f"[IpcModelLoader] Daemon config mismatch!\n"
                               f"  Engine config: {engine_config}\n"
                               f"  Daemon config: {result.get('daemon_config', {})}")
        return result
    except RuntimeError:
        raise
    except Exception as e:  # noqa: BLE001 - SGLang wraps every protocol error the same way
        raise RuntimeError(f"[IpcModelLoader] Error communicating with daemon at {socket_path}: {e}") from e
    finally:
        sock.close()


def start_liveness_watchdog(daemon_pid, log_critical, log):
    """Poll the serving daemon's pid; when it is gone, say so and SIGKILL this process."""
    def _watch():
        while True:
            time.sleep(DAEMON_LIVENESS_POLL_INTERVAL_S)
            if not protocol.is_pid_alive(daemon_pid):
                log_critical(
                    f"[IpcModelLoader] Weight cache daemon (pid={daemon_pid}) "
                    f"died while this engine holds its weights via CUDA IPC. "
                    f"The mapped weight pointers are now dangling; continuing "
                    f"would read freed GPU memory. Terminating this process.")
                os.kill(os.getpid(), 9)
                return

    threading.Thread(target=_watch, name="weight-cache-daemon-watchdog", daemon=True).start()
    log(f"[IpcModelLoader] Started daemon-liveness watchdog for pid={daemon_pid}")
