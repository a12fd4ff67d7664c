"""The server's HTTP state: GET /health and a one-token /v1/completions, with timeouts.
The API key is read on the host from the server's --config file (api_key_config) and
only ever sent."""
import json
import socket
import time
import urllib.error
import urllib.request

try:
    from ansible.module_utils.urls import open_url
except ImportError:
    # The unit's supervisor runs on the host with the standard library only: the same
    # request through urllib's default opener (proxies from the environment, as open_url).
    _OPENER = urllib.request.build_opener()

    def open_url(url, data=None, method=None, headers=None, timeout=10):
        request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
        return _OPENER.open(request, timeout=timeout)

TIMEOUT = "timeout"


def _is_timeout(exc):
    reason = getattr(exc, "reason", exc)
    return isinstance(reason, (socket.timeout, TimeoutError)) or "timed out" in str(reason)


def get_health(base_url, timeout_s=3.0):
    """HTTP status int; None when nothing listens (refused/reset); "timeout"."""
    try:
        with open_url(base_url.rstrip("/") + "/health", timeout=timeout_s) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, OSError) as e:
        return TIMEOUT if _is_timeout(e) else None


def get_page(base_url, path, timeout_s=3.0):
    """(status, body text) of GET path: status an int (body None unless 200), None when
    nothing answers (refused/reset), "timeout"."""
    try:
        with open_url(base_url.rstrip("/") + path, timeout=timeout_s) as r:
            body = r.read(4 * 2**20).decode("utf-8", "replace") if r.status == 200 else None
            return r.status, body
    except urllib.error.HTTPError as e:
        return e.code, None
    except (urllib.error.URLError, OSError, ValueError) as e:
        return (TIMEOUT if _is_timeout(e) else None), None


def get_text(base_url, path, timeout_s=3.0):
    """The body of GET path as text, or None (no answer, an error status, a timeout)."""
    return get_page(base_url, path, timeout_s)[1]


def post_completion(base_url, model, api_key=None, timeout_s=10.0, prompt="Hello"):
    """{"ok": bool, "status": int or None, "ms": float}; ok means a choice came back."""
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": 1,
                       "temperature": 0}).encode()
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer %s" % api_key
    t0 = time.monotonic()
    status, ok = None, False
    try:
        with open_url(base_url.rstrip("/") + "/v1/completions", data=body, method="POST",
                      headers=headers, timeout=timeout_s) as r:
            status = r.status
            payload = json.loads(r.read(65536) or b"{}")
            ok = status == 200 and bool(payload.get("choices"))
    except urllib.error.HTTPError as e:
        status = e.code
    except (urllib.error.URLError, OSError, ValueError):
        pass
    return {"ok": ok, "status": status, "ms": round((time.monotonic() - t0) * 1000.0, 1)}
