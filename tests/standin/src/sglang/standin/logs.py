"""Log output of the SGLang stand-in in SGLang's format, and tqdm-style bars.

Every record is one os.write to stderr (atomic for short lines on a pipe), as
`[YYYY-MM-DD HH:MM:SS TPn] message` (no rank part for the main process,
milliseconds with SGLANG_LOG_MS=1). Bars are written as tqdm writes them: a `\\r`
before every frame, a newline only when the bar closes.
"""
import os
import time

STDERR = 2


def _stamp():
    now = time.time()
    text = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
    if os.environ.get("SGLANG_LOG_MS") == "1":
        text += f".{int(now * 1000) % 1000:03d}"
    return text


def write_raw(text):
    data = text.encode("utf-8", "replace")
    while data:
        n = os.write(STDERR, data)
        data = data[n:]


def log(message, rank=None):
    """One logging record; a multi-line message keeps the prefix on its first line."""
    part = f" TP{rank}" if rank is not None else ""
    write_raw(f"[{_stamp()}{part}] {message}\n")


def uvicorn(message, level="INFO"):
    log(f"{level + ':':<9} {message}")


def _fmt_interval(seconds):
    seconds = int(seconds)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h:d}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def _rate_parts(n, total, elapsed):
    if n <= 0 or elapsed <= 0:
        return "?", "?it/s"
    rate = n / elapsed
    remaining = _fmt_interval((total - n) / rate)
    if rate < 1:
        return remaining, f"{1 / rate:5.2f}s/it"
    return remaining, f"{rate:5.2f}it/s"


class Bar:
    """A tqdm bar. style "completed": SGLang's shard-loader format; "classic": tqdm default."""

    def __init__(self, desc, total, style="completed"):
        self.desc = desc
        self.total = total
        self.style = style
        self.n = 0
        self.start = time.monotonic()
        self._last_len = 0
        self._frame()

    def _text(self):
        elapsed = time.monotonic() - self.start
        remaining, rate = _rate_parts(self.n, self.total, elapsed)
        pct = 100.0 * self.n / self.total if self.total else 100.0
        times = f"[{_fmt_interval(elapsed)}<{remaining}, {rate}]"
        if self.style == "completed":
            return f"{self.desc}: {pct:3.0f}% Completed | {self.n}/{self.total} {times}"
        width = 10
        filled = width * self.n / self.total if self.total else width
        full = int(filled)
        bar = "#" * full
        if full < width:
            frac = int((filled - full) * 10)
            bar += (str(frac) if frac else " ") + " " * (width - full - 1)
        return f"{self.desc}: {pct:3.0f}%|{bar}| {self.n}/{self.total} {times}"

    def _frame(self):
        text = self._text()
        pad = " " * max(0, self._last_len - len(text))
        self._last_len = len(text)
        write_raw("\r" + text + pad)

    def update(self, n=1, desc=None):
        self.n += n
        if desc is not None:
            self.desc = desc
        self._frame()

    def close(self):
        write_raw("\n")


# Fatal messages, as real SGLang / PyTorch print them. Keys are fault "line" presets.
def fatal_messages(preset, rank, settings):
    total_gib = settings.gpu_mem_mib / 1024
    presets = {
        "packing": [
            "Unexpected error during packing of layer model.layers.37.mlp.experts: "
            "RuntimeError: CUDA error: an illegal memory access was encountered",
            "Traceback (most recent call last):\n"
            '  File "/opt/sglang/venvs/0.5.23/lib/python3.11/site-packages/sglang/srt/model_loader/loader.py", '
            "line 688, in load_weights_and_postprocess\n"
            "    quant_method.process_weights_after_loading(module)\n"
            "RuntimeError: CUDA error: an illegal memory access was encountered\n"
            "CUDA kernel errors might be asynchronously reported at some other API call, so the "
            "stacktrace below might be incorrect.",
        ],
        "oom": [
            "Scheduler hit an exception: Traceback (most recent call last):\n"
            '  File "/opt/sglang/venvs/0.5.23/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", '
            "line 3021, in run_scheduler_process\n"
            "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
            f"GPU {rank} has a total capacity of {total_gib:.2f} GiB of which 1.02 GiB is free. "
            "Of the allocated memory 86.12 GiB is allocated by PyTorch, and 1.37 GiB is reserved "
            "by PyTorch but unallocated.",
            "Capture cuda graph failed: CUDA out of memory.",
        ],
        "unbalanced": [
            "Scheduler hit an exception: Traceback (most recent call last):\n"
            '  File "/opt/sglang/venvs/0.5.23/lib/python3.11/site-packages/sglang/srt/model_executor/model_runner.py", '
            "line 712, in init_torch_distributed\n"
            "    raise ValueError(\n"
            "ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
            f"min_per_gpu_memory=12.31, local_gpu_memory={total_gib - 0.5:.2f}, "
            f"local_gpu_memory * 0.9={(total_gib - 0.5) * 0.9:.2f}",
        ],
        "capture": [
            "Capture cuda graph failed: CUDA error: operation not permitted when stream is capturing\n"
            "Possible solutions:\n"
            "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
            "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)\n"
            "3. disable torch compile by not using --enable-torch-compile\n"
            "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)",
        ],
        "watchdog": [
            "Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
        ],
        "warmup": [
            "Initialization failed. warmup error: Traceback (most recent call last):\n"
            "RuntimeError: CUDA error: an illegal memory access was encountered",
        ],
        "safetensors": [
            "Scheduler hit an exception: Traceback (most recent call last):\n"
            "safetensors_rust.SafetensorError: Error while deserializing header: "
            "MetadataIncompleteBuffer",
        ],
    }
    return presets.get(preset, [preset])
