"""Whether the JIT and kernel caches a server is about to start with hold anything.

The sglang role exports each cache folder to the unit (`sglang_cache_env`); the unit's
supervisor runs with that environment, so the folders it names are the server's. A start
whose caches are empty compiles (DeepGEMM, Triton, Inductor, FlashInfer, CUDA: minutes);
one whose caches are filled does not. The start's trace records which (eta.LoadConditions
`compile_caches`). Standard library only: this runs on the host.
"""
import os

# SGLang 0.5.23's cache variables (sglang-facts.md "Caches that decide how long a restart
# takes"; roles/sglang/defaults/main.yml sglang_cache_env).
CACHE_VARIABLES = ("SGLANG_CACHE_DIR", "SGLANG_DG_CACHE_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR",
                   "FLASHINFER_WORKSPACE_BASE", "CUDA_CACHE_PATH")


def holds_a_file(folder):
    """True when a regular file is anywhere under folder (stops at the first one)."""
    for dummy_root, dummy_dirs, files in os.walk(folder):
        if files:
            return True
    return False


def compile_cache_warmth(environ=None):
    """warm (every cache folder named holds a file), cold (none does), partial, or None when
    the environment names no cache folder."""
    environ = os.environ if environ is None else environ
    folders = [environ[name] for name in CACHE_VARIABLES if environ.get(name)]
    if not folders:
        return None
    filled = sum(1 for folder in folders if holds_a_file(folder))
    return "warm" if filled == len(folders) else "cold" if filled == 0 else "partial"
