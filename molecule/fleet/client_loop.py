"""A client of the fleet: sends one-token-at-a-time completions through the load balancer
until told to stop, and counts every answer.

  python client_loop.py URL KEY_FILE RESULT_JSON STOP_FILE [--workers N]

Each worker sends requests one after another (a new connection each, as many clients
do). A request fails when it gets no HTTP answer, a status other than 200, or a body
without a completion. RESULT_JSON gets {"sent", "ok", "failed", "errors"} when
STOP_FILE appears (errors: the first 20, with the time they happened).
"""
import argparse
import json
import os
import threading
import time
import urllib.error
import urllib.request


def send_one(url, key):
    body = json.dumps({"model": "kimi-k2.6", "prompt": "fleet check", "max_tokens": 4}).encode()
    request = urllib.request.Request(url + "/v1/completions", data=body, method="POST", headers={
        "content-type": "application/json", "authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            answer = json.loads(response.read())
        if not answer.get("choices"):
            return f"no completion in the answer: {answer}"[:200]
        return None
    except urllib.error.HTTPError as error:
        return f"HTTP {error.code}"
    except (OSError, ValueError) as error:
        return f"{type(error).__name__}: {error}"[:200]


def run(url, key, stop_file, workers):
    counts = {"sent": 0, "ok": 0, "failed": 0, "errors": []}
    lock = threading.Lock()

    def worker():
        while not os.path.exists(stop_file):
            error = send_one(url, key)
            with lock:
                counts["sent"] += 1
                if error is None:
                    counts["ok"] += 1
                else:
                    counts["failed"] += 1
                    if len(counts["errors"]) < 20:
                        counts["errors"].append(f"{time.strftime('%H:%M:%S')} {error}")

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return counts


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("key_file")
    parser.add_argument("result")
    parser.add_argument("stop_file")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with open(args.key_file, encoding="utf-8") as handle:
        key = handle.read().strip()
    counts = run(args.url, key, args.stop_file, args.workers)
    with open(args.result + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(counts, handle)
    os.replace(args.result + ".tmp", args.result)


if __name__ == "__main__":
    main()
