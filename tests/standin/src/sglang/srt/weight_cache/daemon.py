"""`python -m sglang.srt.weight_cache.daemon ...` for the SGLang stand-in (test double).

The weight cache daemon of SGLang 0.5.23 (see sglang/standin/wc_daemon.py). Spawned
daemons import this module again as `__mp_main__`: it stays this small.
"""
import sys

# Where the real module defines it: the role's flags check imports it from here.
from sglang.standin.wc_daemon import WeightCacheDaemonArgs  # noqa: F401

if __name__ == "__main__":
    from sglang.standin.wc_daemon import main

    sys.exit(main())
