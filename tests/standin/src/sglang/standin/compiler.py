"""A JIT compiler child of the SGLang stand-in (comm `nvcc`, `cc1plus` or `ptxas`).

Burns CPU and writes kernel files into the DeepGEMM cache directory for the given
number of seconds: what a cold DeepGEMM JIT pre-compile looks like from outside.
"""
import os
import time

from sglang.standin.procs import burn, child_setup


def child_main(spec):
    child_setup(spec, comm=spec["title"])
    end = time.monotonic() + spec["seconds"]
    i = 0
    while time.monotonic() < end:
        burn(min(0.5, max(0.0, end - time.monotonic())), spec["duty"])
        path = os.path.join(spec["cache_dir"], f"kernel.{spec['title']}.{os.getpid()}.{i}.cubin")
        with open(path, "wb") as f:
            f.write(os.urandom(64 * 1024))
        i += 1
