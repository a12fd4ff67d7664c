"""What PyTorch's Inductor and a kernel tuner look like from outside during a healthy start.

- autotune(): max-autotune benchmarking kernel configs: for each config that does not fit,
  the glog-style record torch/_inductor/select_algorithm.py logs ("Runtime error during
  autotuning ... OutOfMemoryError: out of resource ... Ignoring this choice."), written by
  the rank itself without SGLang's prefix, as torch's own logger writes it; compile-worker
  child processes that come and go (each burns CPU for one config, then exits); the GPU
  busy in short bursts while a config is benchmarked. Then the start goes on.
- tuning_loop(): a tuner waiting on the GPU: every sample of the rank's stack is the same
  `synchronize` frame, the GPU at 0 % on most samples with a 2-27 % burst every period_s.

Both only delay the start; nothing here ends it.
"""
import os
import random
import sys
import time

from sglang.standin import logs
from sglang.standin.procs import burn, child_setup, spawn

UTIL_BURST = (2, 27)
UTIL_IDLE = (0, 0)
SELECT_ALGORITHM_LINE = 2283


def _site_packages():
    return os.path.join(sys.prefix, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")


def _glog_prefix(level="E"):
    now = time.time()
    return "%s%s %s.%06d %d" % (level, time.strftime("%m%d", time.localtime(now)),
                                time.strftime("%H:%M:%S", time.localtime(now)), int(now * 1e6) % 1000000, os.getpid())


def autotune_record(required=262144, limit=232448):
    """One record of Inductor's autotuner for a kernel config that does not fit: one
    logging record (first line prefixed), as torch writes it."""
    site = _site_packages()
    return (
        f"{_glog_prefix()} torch/_inductor/select_algorithm.py:{SELECT_ALGORITHM_LINE}] "
        "Runtime error during autotuning: \n"
        "Traceback (most recent call last):\n"
        f'  File "{site}/torch/_inductor/select_algorithm.py", line 2270, in benchmark_choice\n'
        "    result = choice.benchmark(*inpts, out=output)\n"
        f'  File "{site}/torch/_inductor/select_algorithm.py", line 1712, in benchmark\n'
        "    return self.bmreq.benchmark(*args, output_tensor=out)\n"
        f'  File "{site}/torch/_inductor/autotune_process.py", line 647, in benchmark\n'
        "    out = self.do_bench(fn, *input_tensors, output_tensor)\n"
        f'  File "{site}/torch/_inductor/runtime/triton_heuristics.py", line 1098, in run\n'
        "    self.autotune_to_one_config(*args, **kwargs)\n"
        f"RuntimeError: No valid triton configs. OutOfMemoryError: out of resource: triton_mm Required: {required} "
        f"Hardware limit:{limit} Reducing block sizes or `num_stages` may help.. \n"
        "Ignoring this choice.")


def worker_title(n):
    site = _site_packages()
    return (f"{sys.executable} {site}/torch/_inductor/compile_worker/__main__.py "
            "--pickler=torch._inductor.compile_worker.subproc_pool.SubprocPickler --kind=fork "
            f"--workers={n} --parent={os.getpid()} --read-fd=7 --write-fd=10")


def autotune(fault, holder, settings):
    """`fault.configs` configs over `fault.seconds`: per config, workers compile and
    benchmark it (CPU, a GPU burst), then the record that it did not fit."""
    workers = fault.workers or settings.jit_compilers
    configs = max(1, fault.configs)
    slot_s = fault.seconds / configs
    before = holder.util
    for i in range(configs):
        procs = [spawn(worker_title(workers), "sglang.standin.inductor",
                       {"seconds": slot_s * 0.6, "duty": settings.spin_duty}) for _ in range(workers)]
        holder.set(util=UTIL_BURST)
        for p in procs:
            p.wait()
        holder.set(util=UTIL_IDLE)
        time.sleep(slot_s * 0.4)
        logs.write_raw(autotune_record(required=262144 + 16384 * (i % 3)) + "\n")
    holder.set(util=before)


def synchronize(holder, plan):
    """Named as torch.cuda.synchronize: a tuning rank waits here on every sample."""
    for util, seconds in plan:
        holder.set(util=util)
        time.sleep(seconds)


def tuning_plan(fault, rng=random.random):
    """[(util range, seconds)] for `fault.seconds`: idle, then a short burst, every period."""
    plan, left = [], fault.seconds
    low, high = fault.period_s
    while left > 0:
        wait = min(left, low + (high - low) * rng())
        plan.append((UTIL_IDLE, wait))
        left -= wait
        if left > 0:
            burst = min(left, fault.burst_s)
            plan.append((UTIL_BURST, burst))
            left -= burst
    return plan


def tuning_loop(fault, holder):
    before = holder.util
    synchronize(holder, tuning_plan(fault))
    holder.set(util=before)


def child_main(spec):
    """A compile worker: comm python3, burns CPU for its config, then exits."""
    child_setup(spec, comm="python3")
    burn(spec["seconds"], spec["duty"])
