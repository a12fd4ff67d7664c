#!/usr/bin/env python3
"""Restart a ready GPU server from a process snapshot and time it against its cold start.

On a machine with an NVIDIA GPU, as root: starts a real server (tests/gpu/tp_server.py
at TP=1: a launcher and one rank holding weights and a KV cache on the GPU, answering
/v1/completions), then

  suspend   cuda-checkpoint --toggle on every process of the tree that holds the GPU
            (the driver copies device memory into the process's host memory)
  dump      criu dump of the whole tree (CRIU kills it once the image is written)
  restore   criu restore --restore-detached from the image, the same PIDs
  resume    cuda-checkpoint --toggle again (host copy back onto the GPU)

and checks that the restored server answers a completion with the same text. The
restore runs twice: with the image in the page cache (just written) and after
drop_caches, with the bytes read from disk counted from /proc/diskstats each time. Two
cold starts are timed for comparison: the machine's first (library files not yet in the
page cache) and a second one (warm page cache), which is the one snapshotted.

Then the same for tests/gpu/snapshot_ipc_server.py, which hands a weight shard out
through CUDA IPC (--ipc export: a handle nobody opens; --ipc peer: a child process that
opened it), and a snapshot taken of a server that goes on serving (take: criu dump
--leave-running, resume, a completion, then the restores). A step that fails records its command, exit status and the error lines of
its output (CRIU's log too), and the case goes no further; a failed dump is followed by
a resume in place, so the suspend/resume pair is still measured.

Tools: --tools holds cuda-checkpoint (NVIDIA/cuda-checkpoint, bin/x86_64_Linux; NVIDIA's
licence: never commit it) and debs/ (Debian's criu, 4.2 or later on kernels from 6.16,
with the libraries it needs, glibc and its loader included), unpacked with dpkg -x into
--work, never into /; docs/snapshot-restart.md lists the packages. Results go to --out
as snapshot_results.json, rewritten after every step (the H200 runs' are
tests/gpu/snapshot_results_h200.json and, for --cases take, snapshot_results_h200_take.json).

  python3 tests/gpu/snapshot_restart.py --tools .snapshot-tools --work /tmp/snap --out "$OUT"
"""
import argparse
import ctypes
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
DISK = re.compile(r"^(vd[a-z]+|sd[a-z]+|xvd[a-z]+|nvme\d+n\d+)$")
PR_SET_CHILD_SUBREAPER = 36
# The rank held an io_uring (torch's TCPStore on libuv), which CRIU cannot dump. On the
# H200 machine UV_USE_IO_URING=0 alone left it in place; USE_LIBUV=0 (the store's
# backend without libuv) removed it. Both are tried, in this order, and the result kept.
IO_URING_OFF = ({"UV_USE_IO_URING": "0"}, {"USE_LIBUV": "0"})
CRIU_COMMON = ["--tcp-established", "--file-locks", "--network-lock", "skip", "--file-validation", "filesize"]


class Run:
    def __init__(self, a):
        self.a = a
        self.t0 = time.monotonic()
        self.results = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": {}, "cases": []}
        self.criu = None

    def left_s(self):
        return self.a.budget_s - (time.monotonic() - self.t0)

    def save(self):
        with open(os.path.join(self.a.out, "snapshot_results.json"), "w") as f:
            json.dump(self.results, f, indent=1)


def say(msg):
    print("[%7.1f] %s" % (time.monotonic() - START, msg), flush=True)


def sh(cmd, env=None, timeout=300):
    t = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = "timeout", e.stdout or "", e.stderr or ""
        out, err = (x.decode() if isinstance(x, bytes) else x for x in (out, err))
    except OSError as e:
        rc, out, err = "oserror", "", str(e)
    return {"cmd": " ".join(cmd), "rc": rc, "s": round(time.monotonic() - t, 3),
            "out": out[-2000:], "err": err[-2000:]}


def error_lines(path, n=25):
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    picked = [l for l in lines if re.search(r"Error|error|Can't|Unable|failed|Warn", l)]
    return (picked or lines)[-n:]


# ------------------------------------------------------------------ the machine
def gpu_mem_mib():
    r = sh(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"])
    try:
        return int(r["out"].split()[0])
    except (IndexError, ValueError):
        return None


def compute_apps():
    r = sh(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"])
    return [l.strip() for l in r["out"].splitlines() if l.strip()]


def disk_read_bytes():
    total = 0
    with open("/proc/diskstats") as f:
        for line in f:
            fields = line.split()
            if DISK.match(fields[2]):
                total += int(fields[5]) * 512
    return total


def meminfo_gib(*keys):
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            if k in keys:
                out[k] = round(int(v.split()[0]) / 2**20, 2)
    return out


def proc_state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def alive(pid):
    return proc_state(pid) not in (None, "Z", "X")


def tree(root):
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        pid = todo.pop(0)
        if alive(pid):
            out.append(pid)
            todo.extend(sorted(children.get(pid, [])))
    return out


def nvidia_files(pid):
    """What of the GPU driver a process still holds: open /dev/nvidia* files and mappings."""
    fds, maps = set(), set()
    for fd in glob.glob("/proc/%d/fd/*" % pid):
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("/dev/nvidia"):
            fds.add(target)
    try:
        with open("/proc/%d/maps" % pid) as f:
            maps = {l.split()[-1] for l in f if "/dev/nvidia" in l}
    except OSError:
        pass
    return sorted(fds), sorted(maps)


def rss_gib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 2**20, 2)
    except OSError:
        return None


def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_tree(pids, baseline_mib):
    t = time.monotonic()
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    while any(alive(p) for p in pids) and time.monotonic() - t < 30:
        reap()
        time.sleep(0.05)
    gone = time.monotonic() - t
    while (gpu_mem_mib() or 0) > baseline_mib + 64 and time.monotonic() - t < 60:
        time.sleep(0.2)
    reap()
    return {"exited_s": round(gone, 2), "gpu_released_s": round(time.monotonic() - t, 2), "gpu_mem_mib": gpu_mem_mib()}


# ------------------------------------------------------------------ the server
def post_completion(port):
    body = json.dumps({"model": "m", "prompt": "Say one word.", "max_tokens": 1}).encode()
    req = urllib.request.Request("http://127.0.0.1:%d/v1/completions" % port, data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())["choices"][0]["text"]


def wait_ready(port, timeout_s, pids=()):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if pids and not any(alive(p) for p in pids):
            return None
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=2) as r:
                if r.status == 200:
                    return post_completion(port)
        except OSError:
            pass
        time.sleep(0.1)
    return None


def wait_for_line(path, pattern, after, timeout_s):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        with open(path, errors="replace") as f:
            f.seek(after)
            found = [l for l in f.read().splitlines() if re.search(pattern, l)]
        if found:
            return found[-1]
        time.sleep(0.2)
    return None


def start(case, log_path):
    env = dict(os.environ, PYTHONUNBUFFERED="1", **case["env"])
    log = open(log_path, "w")
    t = time.monotonic()
    p = subprocess.Popen(case["cmd"], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                         env=env, start_new_session=True, cwd=os.path.dirname(HERE))
    log.close()
    text = wait_ready(case["port"], case["start_timeout_s"], [p.pid])
    return p, text, round(time.monotonic() - t, 2)


def gpu_pids(root):
    return [p for p in tree(root) if nvidia_files(p)[0]]


def io_uring_pids(root):
    """CRIU cannot dump an io_uring instance ("Unknown shit 600 (anon_inode:[io_uring])")."""
    out = []
    for pid in tree(root):
        try:
            with open("/proc/%d/maps" % pid) as f:
                if "anon_inode:[io_uring]" in f.read():
                    out.append(pid)
        except OSError:
            pass
    return out


def start_without_io_uring(case, log_path, res, baseline):
    """Starts the server; where a process of it holds an io_uring, starts it again with
    the next switch in IO_URING_OFF (kept for the cases after it)."""
    for switch in IO_URING_OFF:
        case["env"].update(switch)
        p, text, s = start(case, log_path)
        rings = io_uring_pids(p.pid) if text is not None else []
        res.setdefault("io_uring", []).append({"env": dict(case["env"]), "pids_with_io_uring": rings})
        if not rings:
            break
        say("%s: io_uring in %s with %s: starting again" % (case["name"], rings, case["env"]))
        kill_tree(tree(p.pid), baseline)
        p.wait()
    return p, text, s


# ------------------------------------------------------------------ the steps
def toggle(run, pids, step, children_first=True):
    """cuda-checkpoint --toggle on each PID (a suspend takes the children first, a resume
    the parents first); stops at the first failure."""
    out = {"pids": {}, "s": 0.0}
    for pid in sorted(pids, reverse=children_first):
        r = sh([run.a.cuda_checkpoint, "--toggle", "--pid", str(pid)], timeout=240)
        state = sh([run.a.cuda_checkpoint, "--get-state", "--pid", str(pid)])
        out["pids"][pid] = {"rc": r["rc"], "s": r["s"], "out": r["out"].strip(), "err": r["err"].strip(),
                            "state_after": (state["out"] + state["err"]).strip()}
        out["s"] = round(out["s"] + r["s"], 3)
        say("%s pid %d: rc %s in %.2f s, state %s %s" % (step, pid, r["rc"], r["s"],
                                                        out["pids"][pid]["state_after"], r["err"].strip()[:300]))
        if r["rc"] != 0:
            out["failed"] = pid
            break
    return out


def criu(run, verb, images, log_name, extra):
    log = os.path.join(run.a.work, log_name)
    if not run.criu:
        return {"cmd": "criu " + verb, "rc": "no criu", "s": 0.0, "log_errors": [str(run.results["machine"].get("criu"))]}
    r = sh(run.criu + [verb, "-D", images, "-o", log] + CRIU_COMMON + extra, timeout=400)
    r["log_errors"] = error_lines(log)
    say("criu %s: rc %s in %.2f s %s" % (verb, r["rc"], r["s"], (r["log_errors"] or [""])[-1][:300]))
    return r


def dir_bytes(path):
    return sum(os.path.getsize(f) for f in glob.glob(os.path.join(path, "*")) if os.path.isfile(f))


def drop_caches():
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return "dropped"
    except OSError as e:
        return "could not drop the page cache: %s" % e


def restore_and_check(run, case, res, images, label, root, pids, baseline, log_path, dumped_log_size):
    """Restore from the image, resume CUDA, ask for a completion; returns True when the
    restored server answered with the same text."""
    # CRIU validates open regular files by size: the server's log must be as it was at
    # the dump, so what a restored run appended is kept aside and cut off.
    shutil.copy(log_path, log_path + "." + label)
    os.truncate(log_path, dumped_log_size)
    step = {"label": label}
    res["restores"].append(step)
    step["page_cache_before"] = meminfo_gib("Cached", "MemFree", "MemAvailable")
    disk0, t0 = disk_read_bytes(), time.monotonic()
    step["restore"] = criu(run, "restore", images, "restore-%s-%s.log" % (case["name"], label), ["--restore-detached"])
    step["restore"]["disk_read_gib"] = round((disk_read_bytes() - disk0) / 2**30, 3)
    run.save()
    if step["restore"]["rc"] != 0:
        return False
    step["pids_back"] = [p for p in pids if alive(p)]
    step["rss_gib_after_restore"] = {p: rss_gib(p) for p in pids}
    disk1 = disk_read_bytes()
    step["resume"] = toggle(run, pids, "resume", children_first=case.get("resume_children_first", False))
    step["resume"]["disk_read_gib"] = round((disk_read_bytes() - disk1) / 2**30, 3)
    step["gpu_mem_mib_after_resume"] = gpu_mem_mib()
    step["rss_gib_after_resume"] = {p: rss_gib(p) for p in pids}
    step["compute_apps_after_resume"] = compute_apps()
    run.save()
    if "failed" in step["resume"]:
        kill_tree(tree(root), baseline)
        return False
    try:
        step["completion"] = post_completion(case["port"])
    except OSError as e:
        step["completion_error"] = repr(e)
    step["same_completion"] = step.get("completion") == res["completion_cold"]
    step["restore_to_answer_s"] = round(time.monotonic() - t0, 2)
    if case.get("peer_line"):
        step["peer_after_resume"] = wait_for_line(log_path, case["peer_line"], dumped_log_size, 15)
    say("%s: restore %.2f s (disk %.2f GiB), resume %.2f s, completion %r same=%s, %.2f s to the answer" % (
        label, step["restore"]["s"], step["restore"]["disk_read_gib"], step["resume"]["s"],
        step.get("completion"), step["same_completion"], step["restore_to_answer_s"]))
    step["kill"] = kill_tree(tree(root), baseline)
    run.save()
    return step["same_completion"]


def snapshot_case(run, case):
    res = {"name": case["name"], "what": case["what"], "cmd": " ".join(case["cmd"]), "env": case.get("env", {}),
           "restores": []}
    run.results["cases"].append(res)
    images = os.path.join(run.a.work, "img-" + case["name"])
    shutil.rmtree(images, ignore_errors=True)
    os.makedirs(images)
    baseline = gpu_mem_mib() or 0
    log_path = os.path.join(run.a.work, "server-%s.log" % case["name"])

    if case.get("cold_first"):
        case["env"].update(IO_URING_OFF[0])
        p, text, s = start(case, log_path + ".first")
        res["cold_start_first"] = {"s": s, "completion": text, "gpu_mem_mib": gpu_mem_mib()}
        say("%s: first cold start %.2f s, completion %r" % (case["name"], s, text))
        res["cold_start_first"]["kill"] = kill_tree(tree(p.pid) or [p.pid], baseline)
        run.save()
        if text is None:
            res["stopped_at"] = "cold start"
            return
    p, text, s = start_without_io_uring(case, log_path, res, baseline)
    root = p.pid
    res.update(cold_start_s=s, completion_cold=text, gpu_mem_mib_ready=gpu_mem_mib(), compute_apps=compute_apps(),
               tree=tree(root), mem_before=meminfo_gib("MemTotal", "MemAvailable", "Cached"))
    say("%s: cold start %.2f s, completion %r, GPU %s MiB, tree %s" % (case["name"], s, text, res["gpu_mem_mib_ready"], res["tree"]))
    run.save()
    if text is None:
        res["stopped_at"] = "cold start"
        res["log_tail"] = error_lines(log_path, 40)
        kill_tree(tree(root) or [root], baseline)
        return
    if case.get("peer_line") and not wait_for_line(log_path, case["peer_line"], 0, 60):
        res["stopped_at"] = "peer never read the shared shard"
        res["log_tail"] = error_lines(log_path, 40)
        kill_tree(tree(root), baseline)
        return
    pids = gpu_pids(root)
    res["gpu_pids"] = pids

    res["suspend"] = toggle(run, pids, "suspend")
    res["after_suspend"] = {"gpu_mem_mib": gpu_mem_mib(), "compute_apps": compute_apps(),
                            "rss_gib": {p: rss_gib(p) for p in pids},
                            "nvidia_files": {p: nvidia_files(p) for p in pids},
                            "mem": meminfo_gib("MemAvailable", "Cached")}
    run.save()
    if "failed" in res["suspend"]:
        res["stopped_at"] = "suspend"
        res["log_tail"] = error_lines(log_path, 40)
        res["kill"] = kill_tree(tree(root), baseline)
        return

    take = ["--leave-running"] if case.get("leave_running") else []
    res["dump"] = criu(run, "dump", images, "dump-%s.log" % case["name"], ["-t", str(root), "--ghost-limit", "1G"] + take)
    dumped_log_size = os.path.getsize(log_path)
    res["image_gib"] = round(dir_bytes(images) / 2**30, 3)
    res["after_dump"] = {"tree_alive": [p for p in res["tree"] if alive(p)], "gpu_mem_mib": gpu_mem_mib(),
                         "mem": meminfo_gib("MemAvailable", "Cached", "Dirty")}
    run.save()
    if res["dump"]["rc"] != 0:
        res["stopped_at"] = "dump"
        res["resume_in_place"] = toggle(run, pids, "resume in place", children_first=case.get("resume_children_first", False))
        try:
            res["completion_in_place"] = post_completion(case["port"])
        except OSError as e:
            res["completion_in_place"] = repr(e)
        res["kill"] = kill_tree(tree(root), baseline)
        return
    if take:
        # A snapshot taken of a server that goes on serving: resume it, ask it, stop it.
        res["resume_after_take"] = toggle(run, pids, "resume after the take", children_first=False)
        try:
            res["completion_after_take"] = post_completion(case["port"])
        except OSError as e:
            res["completion_after_take"] = repr(e)
        res["rss_gib_after_resume"] = {p: rss_gib(p) for p in pids}
        res["mem_after_resume"] = meminfo_gib("MemAvailable", "Cached")
        res["kill"] = kill_tree(tree(root), baseline)
    p.wait()
    reap()
    t = time.monotonic()
    os.sync()
    res["sync_after_dump_s"] = round(time.monotonic() - t, 2)
    if not restore_and_check(run, case, res, images, "page_cache", root, pids, baseline, log_path, dumped_log_size):
        res["stopped_at"] = "restore from the page cache"
        return
    res["drop_caches"] = drop_caches()
    res["mem_after_drop"] = meminfo_gib("Cached", "MemAvailable")
    if not restore_and_check(run, case, res, images, "disk", root, pids, baseline, log_path, dumped_log_size):
        res["stopped_at"] = "restore from disk"
        return
    res["stopped_at"] = None


def setup_tools(run):
    a = run.a
    m = run.results["machine"]
    for cmd in (["uname", "-r"], ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                ["ldd", "--version"], ["df", "-h", a.work], ["nproc"]):
        m[cmd[0]] = sh(cmd)["out"].strip().splitlines()[:2]
    with open("/etc/os-release") as f:
        m["os"] = [l.strip() for l in f if l.startswith("PRETTY_NAME")]
    m["mem"] = meminfo_gib("MemTotal", "MemAvailable")
    r = sh([a.cuda_checkpoint, "--help"])
    m["cuda_checkpoint"] = [l for l in (r["out"] + r["err"]).splitlines() if "Version" in l] or [r["err"][-300:]]
    root = os.path.join(a.work, "criu")
    for deb in sorted(glob.glob(os.path.join(a.tools, "debs", "*.deb"))):
        subprocess.run(["dpkg", "-x", deb, root], check=True)
    libs = os.path.join(root, "usr/lib/x86_64-linux-gnu")
    # Debian's criu 4.x needs a newer glibc than some GPU images have: it runs under the
    # loader and libraries it was built with, whatever the system's are.
    criu = [os.path.join(libs, "ld-linux-x86-64.so.2"), "--library-path", libs, os.path.join(root, "usr/sbin/criu")]
    v = sh(criu + ["--version"])
    m["criu"] = (v["out"] + v["err"]).strip().splitlines()[:3]
    if v["rc"] == 0:
        run.criu = criu
    if run.criu:
        c = sh(run.criu + ["check"])
        m["criu_check"] = {"rc": c["rc"], "out": (c["out"] + c["err"]).strip().splitlines()[-15:]}
    say("machine: %s" % json.dumps(m))
    run.save()


def cases(a):
    py = sys.executable
    server = os.path.join(HERE, "tp_server.py")
    ipc = os.path.join(HERE, "snapshot_ipc_server.py")
    common = ["--scenario", "tune", "--tune-s", "2", "--tune-shapes", "small", "--tune-max-m", "64",
              "--shard-gib", "1", "--shard-s", "0.1", "--capture-batches", "4", "--capture-iters", "20",
              "--warmup-s", "1"]
    big = ["--n-shards", str(a.shards), "--kv-cache-gib", str(a.kv_gib)]
    small = ["--n-shards", "4", "--kv-cache-gib", "1"]
    out = {
        "plain": {"what": "tp_server.py, launcher and one rank (1-rank NCCL communicator), %d GiB of weights and %d GiB of KV cache" % (a.shards, a.kv_gib),
                  "cmd": [py, server, "--tp-size", "1", "--port", "30101", "--dist-port", "29701"] + common + big,
                  "port": 30101, "cold_first": True},
        "plain_nocumem": {"what": "as plain, 4+1 GiB, NCCL_CUMEM_ENABLE=0 (NCCL's buffers from cudaMalloc, not cuMem)",
                          "cmd": [py, server, "--tp-size", "1", "--port", "30102", "--dist-port", "29702"] + common + small,
                          "port": 30102, "env": {"NCCL_CUMEM_ENABLE": "0"}},
        "ipc_export": {"what": "one rank (1-rank NCCL communicator), 4+1 GiB, a CUDA IPC handle of a weight shard exported, not opened",
                       "cmd": [py, ipc, "--ipc", "export", "--port", "30103", "--dist-port", "29703"] + common + small,
                       "port": 30103},
        "ipc_peer": {"what": "one rank (1-rank NCCL communicator), 4+1 GiB, a weight shard opened through CUDA IPC by a child process",
                     "cmd": [py, ipc, "--ipc", "peer", "--port", "30104", "--dist-port", "29704"] + common + small,
                     "port": 30104, "peer_line": r"\[peer \d+\] checksum"},
    }
    out["take"] = dict(out["plain_nocumem"], what="as plain, 4+1 GiB: the snapshot taken with criu dump --leave-running, "
                       "the server resumed and asked before it is stopped and restored", env={}, leave_running=True, port=30106,
                       cmd=[x.replace("30102", "30106").replace("29702", "29706") for x in out["plain_nocumem"]["cmd"]])
    out["ipc_peer_child_first"] = dict(out["ipc_peer"], what=out["ipc_peer"]["what"] + "; resumed child first",
                                       resume_children_first=True, port=30105,
                                       cmd=[x.replace("30104", "30105").replace("29704", "29705") for x in out["ipc_peer"]["cmd"]])
    for name, case in out.items():
        case.update(name=name, start_timeout_s=240)
        case.setdefault("env", {})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tools", required=True, help="folder with cuda-checkpoint and debs/")
    ap.add_argument("--work", default="/tmp/snap", help="images, logs and the unpacked CRIU")
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", default="plain,ipc_export,ipc_peer,ipc_peer_child_first,take")
    ap.add_argument("--shards", type=int, default=14, help="plain: GiB of weights (1 GiB shards)")
    ap.add_argument("--kv-gib", type=int, default=6, help="plain: GiB of KV cache")
    ap.add_argument("--budget-s", type=float, default=540, help="start no case after this")
    ap.add_argument("--case-min-s", type=float, default=60, help="start a case only with this much budget left")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: CRIU restores PIDs and TCP sockets, and drop_caches needs it")
    a.cuda_checkpoint = os.path.abspath(os.path.join(a.tools, "cuda-checkpoint"))
    os.makedirs(a.work, exist_ok=True)
    os.makedirs(a.out, exist_ok=True)
    # Restored trees are re-parented to this process, so their exits can be reaped and
    # their PIDs are free again for the next restore.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    run = Run(a)
    known = cases(a)
    names = [n for n in a.cases.split(",") if n]
    unknown = [n for n in names if n not in known]
    if unknown:
        sys.exit("unknown case(s) %s; known: %s" % (", ".join(unknown), ", ".join(known)))
    fallback_env = {}
    setup_tools(run)
    if not run.criu:
        say("no CRIU runs here: %s" % run.results["machine"])
    for name in names:
        if run.left_s() < a.case_min_s:
            run.results["cases"].append({"name": name, "stopped_at": "not run: budget"})
            continue
        case = known[name]
        case.setdefault("env", {}).update(fallback_env)
        snapshot_case(run, case)
        fallback_env.update({k: v for k, v in case["env"].items() if any(k in switch for switch in IO_URING_OFF)})
        run.save()
        if name == "plain" and run.results["cases"][-1].get("stopped_at") == "suspend" and "plain_nocumem" not in names:
            known["plain_nocumem"]["env"].update(fallback_env)
            snapshot_case(run, known["plain_nocumem"])
            if run.results["cases"][-1].get("stopped_at") != "suspend":
                # NCCL's cuMem buffers were what the suspend refused: the IPC cases
                # go without them, so what they show is the IPC handle's doing.
                fallback_env.update(NCCL_CUMEM_ENABLE="0")
    run.results["total_s"] = round(time.monotonic() - run.t0, 1)
    run.save()
    with tarfile.open(os.path.join(a.out, "snapshot_logs.tar.gz"), "w:gz") as tar:
        for f in sorted(glob.glob(os.path.join(a.work, "*.log*"))):
            if os.path.getsize(f) < 64 * 2**20:
                tar.add(f, arcname=os.path.basename(f))
    for res in run.results["cases"]:
        say("%-14s stopped at: %s" % (res["name"], res.get("stopped_at")))


START = time.monotonic()
if __name__ == "__main__":
    main()
