"""SGLang stand-in (test double) for sglang-ops.

This is NOT SGLang. It is the SGLang stand-in: a stdlib-only program that looks like
an SGLang 0.5.23 server from the outside (flags, process titles, log lines, GPU numbers
through a stand-in `nvidia-smi`, HTTP endpoints, injected faults) so the project's
deployment and restart automation can be tested on machines without GPUs.
See README.md of the `sglang-standin` distribution for every knob and fault.
"""
__version__ = "0.5.23"
STANDIN = True
