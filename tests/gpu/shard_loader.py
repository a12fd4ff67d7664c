#!/usr/bin/env python3
"""A real GPU process that starts like an SGLang server: reads safetensors shards from
disk and moves their tensors onto the GPU one shard at a time (tqdm bar with `\\r`
frames on stderr, SGLang-style log lines), allocates a KV cache, "captures graphs" with
real kernels, then serves /health and /v1/completions over HTTP.

Used by record_real_traces.py on a machine with an NVIDIA GPU; not a unit test.
"""
import argparse
import glob
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch
from safetensors import safe_open

RANK = "TP0"
BAR_FORMAT = "{desc}: {percentage:3.0f}% Completed | {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]"


def log(msg, rank=True):
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    prefix = "[%s %s] " % (stamp, RANK) if rank else ""
    sys.stderr.write(prefix + msg + "\n")
    sys.stderr.flush()


def avail_gb():
    free, _total = torch.cuda.mem_get_info()
    return free / 2**30


def used_gb(start_free):
    return (start_free - torch.cuda.mem_get_info()[0]) / 2**30


class Bar:
    """tqdm when present (as SGLang uses it), else the same frames by hand."""

    def __init__(self, total, desc):
        self.total, self.desc, self.n, self.t0 = total, desc, 0, time.monotonic()
        try:
            from tqdm import tqdm
            self.bar = tqdm(total=total, desc=desc, bar_format=BAR_FORMAT, file=sys.stderr,
                            mininterval=0, ascii=False)
        except ImportError:
            self.bar = None
            self._frame()

    def _frame(self):
        el = time.monotonic() - self.t0
        rate = self.n / el if el > 0 and self.n else 0.0
        sys.stderr.write("\r%s: %3.0f%% Completed | %d/%d [%02d:%02d<?, %.2fit/s]" % (
            self.desc, 100.0 * self.n / self.total, self.n, self.total, el // 60, el % 60, rate))
        sys.stderr.flush()

    def update(self):
        self.n += 1
        if self.bar is not None:
            self.bar.update(1)
            sys.stderr.flush()
        else:
            self._frame()

    def close(self):
        if self.bar is not None:
            self.bar.close()
        else:
            sys.stderr.write("\n")
        sys.stderr.flush()


def busy_gpu(x, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(20):
            x = torch.tanh(x @ x) * 0.5
        torch.cuda.synchronize()
    return x


def load_shards(shard_dir, repack_s):
    files = sorted(glob.glob(os.path.join(shard_dir, "*.safetensors")))
    weights = []
    bar = Bar(len(files), "Loading safetensors checkpoint shards")
    for path in files:
        with safe_open(path, framework="pt", device="cpu") as f:
            for name in f.keys():
                weights.append(f.get_tensor(name).to("cuda", non_blocking=False))
        # A real loader repacks quantized weights after the copy; this keeps the GPU
        # busy per shard the way that does.
        busy_gpu(weights[-1][:4096, :4096].clone(), repack_s)
        bar.update()
    bar.close()
    return weights


class Server:
    def __init__(self, model_name, weight):
        self.model_name, self.weight, self.ready = model_name, weight, False
        self.lock = threading.Lock()

    def complete(self):
        with self.lock:
            x = self.weight[:1024, :1024].float()
            token = int(torch.argmax(x @ x.T).item()) % 50000
            torch.cuda.synchronize()
        return token


def make_handler(server):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):
            log('INFO:     127.0.0.1 - "%s" %s' % (self.requestline, args[1] if len(args) > 1 else ""), rank=False)

        def _send(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path.startswith("/health"):
                self._send(200 if server.ready else 503, {})
            elif self.path in ("/model_info", "/v1/models"):
                self._send(200, {"model_path": server.model_name})
            else:
                self._send(404, {"detail": "Not Found"})

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            req = json.loads(self.rfile.read(length) or b"{}")
            if self.path not in ("/v1/completions", "/generate"):
                self._send(404, {"detail": "Not Found"})
                return
            if not server.ready and self.path == "/v1/completions":
                self._send(503, {"detail": "server is starting"})
                return
            token = server.complete()
            self._send(200, {"id": "cmpl-%d" % token, "object": "text_completion",
                             "model": req.get("model", server.model_name),
                             "choices": [{"index": 0, "text": " tok%d" % token, "finish_reason": "length"}],
                             "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
    return Handler


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-path", required=True)
    ap.add_argument("--port", type=int, default=30001)
    ap.add_argument("--tp-rank", type=int, default=0)
    ap.add_argument("--repack-s", type=float, default=1.5, help="GPU work per shard")
    ap.add_argument("--post-load-s", type=float, default=6.0)
    ap.add_argument("--kv-cache-gib", type=float, default=8.0)
    ap.add_argument("--warmup-s", type=float, default=4.0)
    a = ap.parse_args()

    log("server_args=ServerArgs(model_path='%s', tp_size=1, port=%d)" % (a.model_path, a.port), rank=False)
    log("Init torch distributed begin.")
    torch.cuda.init()
    start_free = torch.cuda.mem_get_info()[0]
    torch.empty(1, device="cuda")
    log("Init torch distributed ends. mem usage=%.2f GB" % used_gb(start_free))
    log("Load weight begin. avail mem=%.2f GB" % avail_gb())
    t0 = time.monotonic()
    weights = load_shards(a.model_path, a.repack_s)
    log("Load weight end. elapsed=%.2f s, type=ShardLoaderForTest, dtype=torch.bfloat16, avail mem=%.2f GB, mem usage=%.2f GB."
        % (time.monotonic() - t0, avail_gb(), used_gb(start_free)))
    # Post-load work before the KV cache (the quiet phase of the incident).
    w = busy_gpu(weights[0][:4096, :4096].clone(), a.post_load_s)
    n_tokens = int(a.kv_cache_gib * 2**30 / 2 / 1024)
    kv = torch.zeros(n_tokens, 1024, dtype=torch.bfloat16, device="cuda")
    log("KV Cache is allocated. #tokens: %d, KV size: %.2f GB" % (n_tokens, kv.numel() * 2 / 2**30))
    log("Memory pool end. avail mem=%.2f GB" % avail_gb())
    log("Capture cuda graph begin. This can take up to several minutes. avail mem=%.2f GB" % avail_gb())
    t1 = time.monotonic()
    w = busy_gpu(w, 3.0)
    log("Capture cuda graph end. Time elapsed: %.2f s. mem usage=%.2f GB. avail mem=%.2f GB."
        % (time.monotonic() - t1, used_gb(start_free), avail_gb()))
    log("max_total_num_tokens=%d, chunked_prefill_size=8192, max_prefill_tokens=16384, context_len=4096" % n_tokens)

    server = Server(a.model_path, weights[0])
    httpd = ThreadingHTTPServer(("127.0.0.1", a.port), make_handler(server))
    log("INFO:     Started server process [%d]" % os.getpid(), rank=False)
    log("INFO:     Waiting for application startup.", rank=False)
    log("INFO:     Application startup complete.", rank=False)
    log("INFO:     Uvicorn running on http://127.0.0.1:%d (Press CTRL+C to quit)" % a.port, rank=False)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    time.sleep(a.warmup_s)
    server.complete()
    server.ready = True
    log("The server is fired up and ready to roll!", rank=False)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main()
