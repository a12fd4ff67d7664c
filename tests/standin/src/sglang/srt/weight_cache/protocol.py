"""Weight cache paths, ready files and socket framing, as SGLang 0.5.23 has them
(sglang/srt/weight_cache/protocol.py), for the SGLang stand-in (test double).

The daemon of one physical GPU listens on SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE and writes
SGLANG_WEIGHT_CACHE_READY_TEMPLATE (`pid=` and `config=` lines), both filled with the
GPU's UUID as torch reports it: the nvidia-smi UUID without its `GPU-` prefix. Messages
are length-prefixed pickles ("!I" header), so a real client's `ping` or `query_config`
gets the stand-in's answer.

Which quantization methods the daemon and the client share over CUDA IPC is decided here
too, as 0.5.23 does (IPC_QUANT_ALLOWLIST, is_ipc_quant_supported, check_ipc_quant_support):
unquantized and block-wise FP8 only; the role asks is_ipc_quant_supported of the venv.
"""
import logging
import os
import pickle
import signal
import struct

from sglang.standin.gpustate import gpu_uuid

SOCKET_TEMPLATE_ENV = "SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE"
READY_TEMPLATE_ENV = "SGLANG_WEIGHT_CACHE_READY_TEMPLATE"
DEFAULT_SOCKET_TEMPLATE = "/tmp/sglang_weight_cache_{device_uuid}.sock"
DEFAULT_READY_TEMPLATE = "/tmp/sglang_weight_cache_{device_uuid}.ready"
MAX_MSG_SIZE = 256 * 1024 * 1024

logger = logging.getLogger(__name__)


class UnsupportedQuantForIPCError(RuntimeError):
    """A quantization method not verified for CUDA IPC weight sharing."""


def _block_wise_fp8(quant_config):
    field = quant_config.get("weight_block_size") if isinstance(quant_config, dict) else \
        getattr(quant_config, "weight_block_size", None)
    return field is not None


# quant_method -> predicate(quant_config); a method not listed is refused.
IPC_QUANT_ALLOWLIST = {
    "": lambda _quant_config: True,
    "fp8": _block_wise_fp8,
}


def is_ipc_quant_supported(quant_method, quant_config):
    predicate = IPC_QUANT_ALLOWLIST.get(quant_method)
    return predicate is not None and bool(predicate(quant_config))


def check_ipc_quant_support(quant_method, quant_config, *, where):
    """UnsupportedQuantForIPCError, with 0.5.23's message, unless the method is allowed."""
    if is_ipc_quant_supported(quant_method, quant_config):
        return
    verified = ", ".join(repr(m) if m else "'' (unquantized)" for m in IPC_QUANT_ALLOWLIST)
    raise UnsupportedQuantForIPCError(
        f"[weight_cache:{where}] quantization method {quant_method!r} is not "
        f"verified for CUDA IPC zero-copy weight sharing. Its "
        f"process_weights_after_loading may stamp Python-side metadata "
        f"(e.g. format_ue8m0) or repack/transpose weights into shapes the "
        f"meta-initialized client cannot reproduce, which would silently serve "
        f"wrong-numerics weights. Verified methods: {verified}. Note: FP8 is "
        f"only verified for block-wise configs (weight_block_size set), not "
        f"per-tensor FP8. Disable the weight cache (--weight-cache-mode off) "
        f"for this model.")


def device_uuid(gpu_index):
    """str(torch.cuda.get_device_properties(i).uuid): no `GPU-` prefix."""
    return gpu_uuid(gpu_index).removeprefix("GPU-")


def _format_daemon_path(env_name, default, uuid):
    template = os.environ.get(env_name) or default
    if "{device_uuid}" not in template:
        raise ValueError(
            f"{env_name}={template!r} must contain '{{device_uuid}}': "
            f"each physical GPU needs its own path, and a GPU-independent one "
            f"would point every caller at a single daemon.")
    return template.format(device_uuid=uuid)


def get_socket_path(uuid):
    return _format_daemon_path(SOCKET_TEMPLATE_ENV, DEFAULT_SOCKET_TEMPLATE, uuid)


def get_ready_path(uuid):
    return _format_daemon_path(READY_TEMPLATE_ENV, DEFAULT_READY_TEMPLATE, uuid)


def send_msg(sock, obj):
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(struct.pack("!I", len(data)) + data)


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf.extend(chunk)
    return bytes(buf)


def recv_msg(sock):
    header = _recv_exact(sock, 4)
    if header is None:
        raise ConnectionError("Connection closed while reading message header")
    length = struct.unpack("!I", header)[0]
    if length > MAX_MSG_SIZE:
        raise ValueError(f"Message size {length} exceeds {MAX_MSG_SIZE} byte cap")
    data = _recv_exact(sock, length)
    if data is None:
        raise ConnectionError("Connection closed while reading message body")
    return pickle.loads(data)


def read_ready_pid(ready_path):
    try:
        with open(ready_path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("pid="):
                    return int(line.strip().split("=", 1)[1])
    except (OSError, ValueError):
        pass
    return None


def is_pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def cleanup_stale_daemon_files(uuid, *, force=False):
    """A live daemon's files are refused (or, with force, its process killed); files of
    a dead one are removed."""
    ready_path = get_ready_path(uuid)
    socket_path = get_socket_path(uuid)
    if not os.path.exists(ready_path) and not os.path.exists(socket_path):
        return
    pid = read_ready_pid(ready_path) if os.path.exists(ready_path) else None
    if pid is not None and is_pid_alive(pid):
        if not force:
            raise RuntimeError(
                f"Weight cache daemon for GPU {uuid} is already running "
                f"(pid={pid}, ready={ready_path}). Stop the existing daemon before "
                f"launching a new one, or pass force=True (--force) to kill it and "
                f"take over.")
        logger.warning(
            f"[weight_cache] force takeover: killing existing daemon pid={pid} "
            f"for GPU {uuid} and reclaiming its socket/ready files.")
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for path in (ready_path, socket_path):
        if os.path.exists(path):
            os.unlink(path)
            logger.info(f"Removed stale daemon file: {path}")
