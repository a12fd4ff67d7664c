"""Rule 1's two kinds of lethal-looking line: which lines are *sticky*.

A sticky line names an error a process cannot survive by construction; every other
lethal-looking line (an out-of-memory, "error", a traceback) is *soft*. A soft line is
confirmed only by the process exiting or the start freezing; a sticky one also by the
start making no progress after it, whatever the CPU or GPU utilisation does (the other
ranks of a TP server spin at 100 % waiting for the dead one).

Each entry is (pattern, reason code, where the words come from). The words are those the
libraries themselves print, never ones taken from our traces. Pure data and one function.
"""
import re

STICKY = (
    # CUDA runtime: cudaGetErrorString() of the errors after which the context is unusable
    # ("sticky" errors, CUDA Runtime API, enum cudaError: cudaErrorIllegalAddress,
    # cudaErrorAssert, cudaErrorLaunchFailure, cudaErrorMisalignedAddress,
    # cudaErrorIllegalInstruction, cudaErrorInvalidPc, cudaErrorHardwareStackError,
    # cudaErrorLaunchTimeout, cudaErrorECCUncorrectable). torch raises them from
    # c10/cuda/CUDAException.h (C10_CUDA_CHECK) as "CUDA error: <string>".
    (re.compile(r"an illegal memory access was encountered|device-side assert triggered|unspecified launch failure|"
                r"misaligned address|an illegal instruction was encountered|invalid program counter|"
                r"hardware stack error|the launch timed out and was terminated|uncorrectable ECC error encountered",
                re.I), "fatal_error", "CUDA runtime cudaGetErrorString (sticky cudaError values)"),
    # torch/nn/modules/module.py, Module.load_state_dict(strict=True): raises RuntimeError
    # "Error(s) in loading state_dict for <class>:" with "Missing key(s) in state_dict",
    # "Unexpected key(s) in state_dict" and, from _load_from_state_dict, "size mismatch for
    # <name>: copying a param with shape ... from checkpoint".
    (re.compile(r"Error\(s\) in loading state_dict for|Missing key\(s\) in state_dict|Unexpected key\(s\) in state_dict|"
                r"size mismatch for \S+: copying a param with shape"), "fatal_checkpoint",
     "torch/nn/modules/module.py Module.load_state_dict, Module._load_from_state_dict"),
    # NCCL: ncclGetErrorString() (src/init.cc) as torch's ProcessGroupNCCL reports it
    # (torch/csrc/distributed/c10d/NCCLUtils.hpp C10D_NCCL_CHECK: "NCCL error in: ...",
    # ProcessGroupNCCL.cpp: "NCCL communicator was aborted", "Watchdog caught collective
    # operation timeout", and the DistBackendError it raises).
    (re.compile(r"NCCL error|NCCL communicator was aborted|ncclInternalError|ncclSystemError|ncclUnhandledCudaError|"
                r"ncclInvalidUsage|ncclInvalidArgument|ncclRemoteError|Watchdog caught collective operation timeout|"
                r"DistBackendError", re.I), "fatal_nccl",
     "NCCL ncclGetErrorString (src/init.cc); torch c10d NCCLUtils.hpp, ProcessGroupNCCL.cpp"),
    # The serving port cannot be bound: asyncio's BaseEventLoop.create_server
    # (asyncio/base_events.py) raises OSError "error while attempting to bind on address
    # ...: [Errno 98] address already in use", uvicorn's Server.startup
    # (uvicorn/server.py) logs it and exits; errno 98 is EADDRINUSE (strerror "Address
    # already in use").
    (re.compile(r"error while attempting to bind on address|\[Errno 98\]|address already in use", re.I),
     "fatal_port_in_use", "asyncio/base_events.py create_server; uvicorn/server.py Server.startup; EADDRINUSE"),
    # SGLang 0.5.23's own fatal lines (sglang-facts.md): the hard watchdog (utils/watchdog.py,
    # "... watchdog timeout (... self.soft=False)", SIGQUIT to the launcher 5 s later), the
    # SubprocessWatchdog's "Subprocess NAME (pid=N) crashed with exit code C. Triggering
    # SIGQUIT for cleanup", a scheduler that "hit an exception" (managers/scheduler.py
    # run_scheduler_process), "Rank N scheduler is dead", the launcher's
    # "Initialization failed. warmup error" (entrypoints/http_server.py) and the GPU memory
    # check "The memory capacity is unbalanced. Some GPUs may be occupied by other processes".
    (re.compile(r"watchdog timeout.*self\.soft=False"), "fatal_watchdog", "sglang srt/utils/watchdog.py"),
    (re.compile(r"crashed with exit code .*SIGQUIT|Triggering SIGQUIT for cleanup"), "fatal_error",
     "sglang srt/utils/watchdog.py SubprocessWatchdog"),
    (re.compile(r"Scheduler hit an exception|Rank \d+ scheduler is dead"), "fatal_error",
     "sglang srt/managers/scheduler.py run_scheduler_process"),
    (re.compile(r"Initialization failed\. warmup error"), "fatal_warmup", "sglang srt/entrypoints/http_server.py"),
    (re.compile(r"memory capacity is unbalanced"), "fatal_gpu_occupied", "sglang srt/model_executor/model_runner.py"),
)

_ANY_STICKY = re.compile("|".join("(?:%s)" % p.pattern for p, dummy_code, dummy_src in STICKY), re.I)


def sticky_code(text):
    """The reason code of a sticky line, else None (soft, or not lethal at all)."""
    if not _ANY_STICKY.search(text):
        return None
    for pattern, code, dummy_source in STICKY:
        if pattern.search(text):
            return code
    return None
