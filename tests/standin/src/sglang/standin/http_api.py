"""HTTP API of the SGLang stand-in (stdlib http.server, one thread per request).

Answers like SGLang 0.5.23 once uvicorn would be up: health endpoints 503 until
ready, model/server info at once, deterministic completions (each taking max_tokens *
`decode_s_per_token` seconds), `--api-key` checked on every path except those starting
with /health, /ready and /metrics, uvicorn-style access lines in the log. /metrics counts
the completions in flight as `sglang:num_running_reqs`. A prefill saturation (the
`prefill_saturation` fault) keeps the scheduler on long prompts: completions wait until it
ends while the prefill counters rise and the request gauges show its backlog.
"""
import hashlib
import json
import socket
import socketserver
import sys
import threading
import time
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from sglang import __version__
from sglang.standin import logs

OPEN_PREFIXES = ("/health", "/ready", "/metrics")
WORDS = ("the", "model", "server", "is", "ready", "to", "serve", "tokens", "quickly", "and", "every",
         "request", "gets", "an", "answer", "from", "a", "stand-in", "that", "never", "touches", "GPU")


class ServerState:
    def __init__(self, args, model_info, server_args_dict, rank_command, health_timeout_s, dummy=False,
                 decode_s_per_token=0.0):
        self.args = args
        self.model_info = model_info
        self.server_args = server_args_dict
        self.rank_command = rank_command
        self.health_timeout_s = health_timeout_s
        self.dummy = dummy
        self.decode_s_per_token = decode_s_per_token
        self.ready = threading.Event()
        self.hung = threading.Event()
        self.never = threading.Event()
        self.startup_time = {}
        self.lock = threading.Lock()
        self.counters = {"num_requests_total": 0, "prompt_tokens_total": 0, "generation_tokens_total": 0,
                         "realtime_prefill_compute": 0.0, "realtime_decode": 0.0}
        self.running = 0   # completions between their request and their answer
        self.waiting = 0   # of those, the ones queued behind a prefill saturation
        self.saturation = None

    @property
    def model_name(self):
        return self.args.served_model_name or self.args.model_path

    def saturate(self, fault):
        """A prefill saturation from now on, for fault.seconds; end_saturation() ends it."""
        with self.lock:
            self.saturation = PrefillSaturation(fault, time.monotonic())

    def end_saturation(self):
        """The saturation's finished requests and prefilled tokens stay counted; the
        completions queued behind it go on."""
        with self.lock:
            sat, self.saturation = self.saturation, None
            if sat is None:
                return
            for key, value in sat.counts(time.monotonic()).items():
                self.counters[key] += value
        sat.ended.set()

    def work(self):
        """(counters, running, queued) as /metrics shows them now."""
        with self.lock:
            counters, running, queued = dict(self.counters), self.running - self.waiting, self.waiting
            sat = self.saturation
            if sat is not None:
                for key, value in sat.counts(time.monotonic()).items():
                    counters[key] += value
                running, queued = running + sat.fault.running, queued + sat.fault.queued
        return counters, running, queued


class PrefillSaturation:
    """Long prefill-only requests (SGLang's max_new_tokens 0, as scoring traffic sends them)
    keeping the scheduler busy: prompt tokens processed at fault.prompt_tokens_s, one request
    finished per fault.prompt_tokens of them, no token generated."""

    def __init__(self, fault, started):
        self.fault, self.started = fault, started
        self.ended = threading.Event()

    def counts(self, now):
        """What it added to the counters up to now (SGLang's tokenizer counts a request's
        prompt when it finishes; the scheduler's realtime counter as it prefills)."""
        prefilled = self.fault.prompt_tokens_s * min(max(0.0, now - self.started), self.fault.seconds)
        finished = int(prefilled // self.fault.prompt_tokens)
        return {"num_requests_total": finished, "prompt_tokens_total": finished * self.fault.prompt_tokens,
                "realtime_prefill_compute": prefilled}


def completion_text(prompt, max_tokens):
    words = []
    seed = hashlib.sha256(prompt.encode()).digest()
    while len(words) < max_tokens:
        seed = hashlib.sha256(seed).digest()
        words.extend(WORDS[b % len(WORDS)] for b in seed[:max_tokens - len(words)])
    return " " + " ".join(words)


def prompt_tokens(prompt):
    return max(1, len(prompt.split()))


class Handler(BaseHTTPRequestHandler):
    server_version = "uvicorn"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    state: ServerState = None

    def log_message(self, fmt, *args):
        pass

    def _send(self, status, body=None, content_type="application/json"):
        data = b""
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        phrase = HTTPStatus(status).phrase
        host, port = self.client_address[:2]
        logs.uvicorn(f'{host}:{port} - "{self.command} {self.path} HTTP/1.1" {status} {phrase}')
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _body(self):
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return None

    def _authorized(self):
        key = self.state.args.api_key
        if not key or self.path.startswith(OPEN_PREFIXES):
            return True
        return self.headers.get("authorization", "") == f"Bearer {key}"

    def _route(self):
        st = self.state
        path = self.path.split("?", 1)[0]
        if not self._authorized():
            return self._send(401, {"error": "Unauthorized"})
        if st.dummy:
            if path in ("/health", "/health_generate", "/ping") and st.ready.is_set():
                return self._send(200, b"", "text/plain")
            return self._send(503 if path.startswith("/health") else 404, {"detail": "Not Found"})
        if path in ("/health", "/health_generate", "/ready"):
            return self._health()
        if self.command == "GET":
            if path in ("/model_info", "/get_model_info"):
                return self._send(200, st.model_info)
            if path in ("/server_info", "/get_server_info"):
                info = dict(st.server_args, version=__version__, startup_time=dict(st.startup_time),
                            internal_states=[{"last_gen_throughput": 0.0, "memory_usage": {}}],
                            sglang_standin=True)
                return self._send(200, info)
            if path == "/v1/models":
                return self._send(200, {"object": "list", "data": [{
                    "id": st.model_name, "object": "model", "created": int(time.time()),
                    "owned_by": "sglang", "root": st.args.model_path,
                    "max_model_len": st.server_args.get("context_length")}]})
            if path == "/metrics" and st.args.enable_metrics:
                return self._send(200, self._metrics().encode(), "text/plain; version=0.0.4; charset=utf-8")
        if self.command == "POST":
            if path in ("/v1/completions", "/v1/chat/completions", "/generate"):
                return self._generate(path)
        return self._send(404, {"detail": "Not Found"})

    def _health(self):
        st = self.state
        if not st.ready.is_set():
            return self._send(503, b"", "text/plain")
        if st.hung.is_set():
            # The health generation never finishes; SGLang gives up after its timeout.
            time.sleep(st.health_timeout_s)
            return self._send(503, b"", "text/plain")
        return self._send(200, b"", "text/plain")

    def _generate(self, path):
        st = self.state
        body = self._body()
        if body is None:
            return self._send(400, {"object": "error", "message": "invalid JSON body", "code": 400})
        with st.lock:
            st.running += 1
        try:
            status, payload = self._complete(path, body)
        finally:
            # as in SGLang, a request stops running when its generation ends, before its answer
            # is written: a client holding the answer never sees its own request still running
            with st.lock:
                st.running -= 1
        return self._send(status, payload)

    def _complete(self, path, body):
        """(status, payload) of a generation, once it is done."""
        st = self.state
        if st.hung.is_set():
            st.never.wait()
        sat = st.saturation
        if sat is not None:
            with st.lock:
                st.waiting += 1
            try:
                sat.ended.wait()
            finally:
                with st.lock:
                    st.waiting -= 1
        if path == "/generate":
            prompt = body.get("text") or " ".join(str(t) for t in body.get("input_ids") or [])
            max_tokens = int((body.get("sampling_params") or {}).get("max_new_tokens", 16))
        elif path == "/v1/chat/completions":
            msgs = body.get("messages") or []
            prompt = "\n".join(str(m.get("content", "")) for m in msgs if isinstance(m, dict))
            max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        else:
            prompt = body.get("prompt", "")
            if isinstance(prompt, list):
                prompt = " ".join(str(p) for p in prompt)
            max_tokens = int(body.get("max_tokens") or 16)
        max_tokens = max(1, max_tokens)
        n_prompt = prompt_tokens(prompt)
        st.rank_command({"cmd": "prefill", "tokens": n_prompt})
        text = completion_text(prompt, max_tokens)
        if st.decode_s_per_token > 0:
            time.sleep(max_tokens * st.decode_s_per_token)
        with st.lock:
            st.counters["num_requests_total"] += 1
            st.counters["prompt_tokens_total"] += n_prompt
            st.counters["generation_tokens_total"] += max_tokens
            st.counters["realtime_prefill_compute"] += n_prompt
            st.counters["realtime_decode"] += max_tokens
        usage = {"prompt_tokens": n_prompt, "completion_tokens": max_tokens,
                 "total_tokens": n_prompt + max_tokens}
        rid = uuid.uuid4().hex
        if path == "/generate":
            return (200, {"text": text, "meta_info": {
                "id": rid, "finish_reason": {"type": "length", "length": max_tokens},
                "prompt_tokens": n_prompt, "completion_tokens": max_tokens, "cached_tokens": 0,
                "e2e_latency": 0.01}})
        model = body.get("model") or st.model_name
        if path == "/v1/chat/completions":
            return (200, {"id": rid, "object": "chat.completion", "created": int(time.time()),
                          "model": model, "choices": [{
                              "index": 0, "message": {"role": "assistant", "content": text.strip(),
                                                      "reasoning_content": None, "tool_calls": None},
                              "logprobs": None, "finish_reason": "length"}], "usage": usage})
        return (200, {"id": rid, "object": "text_completion", "created": int(time.time()),
                      "model": model, "choices": [{"index": 0, "text": text, "logprobs": None,
                                                   "finish_reason": "length"}], "usage": usage})

    def _metrics(self):
        st = self.state
        name = st.model_name
        out = []

        def metric(mname, kind, help_text, samples):
            out.append(f"# HELP sglang:{mname} {help_text}")
            out.append(f"# TYPE sglang:{mname} {kind}")
            for labels, value in samples:
                lab = ",".join(f'{k}="{v}"' for k, v in dict(labels, model_name=name).items())
                out.append(f"sglang:{mname}{{{lab}}} {float(value)}")

        c, running, queued = st.work()
        metric("num_running_reqs", "gauge", "The number of running requests.", [({}, running)])
        metric("num_queue_reqs", "gauge", "The number of requests in the waiting queue.", [({}, queued)])
        metric("gen_throughput", "gauge", "The generation throughput (token/s).", [({}, 0)])
        metric("num_requests_total", "counter", "Number of requests processed.", [({}, c["num_requests_total"])])
        metric("prompt_tokens_total", "counter", "Number of prefill tokens processed.",
               [({}, c["prompt_tokens_total"])])
        metric("generation_tokens_total", "counter", "Number of generation tokens processed.",
               [({}, c["generation_tokens_total"])])
        metric("realtime_tokens_total", "counter", "Total number of tokens processed (updated on each log interval). "
               "mode: prefill_compute, prefill_cache, decode.",
               [({"mode": "prefill_compute"}, c["realtime_prefill_compute"]), ({"mode": "prefill_cache"}, 0),
                ({"mode": "decode"}, c["realtime_decode"])])
        metric("startup_time_seconds", "gauge", "Time spent in each start-up phase.",
               [({"phase": k}, v) for k, v in sorted(st.startup_time.items())])
        return "\n".join(out) + "\n"

    def do_GET(self):
        self._route()

    def do_POST(self):
        self._route()

    def do_HEAD(self):
        self._route()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def server_bind(self):
        # Skip HTTPServer's getfqdn(): a reverse lookup can hang on hosts without DNS.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def handle_error(self, request, client_address):
        # A peer that hangs up before the answer is written (HAProxy ends its health checks
        # with a reset) is routine for uvicorn too: no traceback in the journal.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class Server6(Server):
    address_family = socket.AF_INET6


def make_server(host, port, state):
    handler = type("StandinHandler", (Handler,), {"state": state})
    cls = Server6 if ":" in host else Server
    return cls((host, port), handler)
