"""Which release this build of the SGLang stand-in (test double) plays.

The default build is a working 0.5.23. `tests/standin/build --version V --broken` builds
a release whose server fails early at start the way a broken SGLang release does: its
compiled kernel module does not load, so the launch ends with an ImportError traceback
and exit status 1, after the flags were parsed (the version's own parser still works).
The build rewrites BROKEN below in the wheel it makes; the source stays a working release.
"""
BROKEN = False

# What a kernel module built against another torch says when it is imported.
_KERNEL_MODULE = "sgl_kernel/common_ops.abi3.so"
_MISSING_SYMBOL = "_ZN3c1017RegisterOperatorsD1Ev"


def load_kernels():
    """Import the compiled kernels; in a broken release this raises ImportError."""
    if BROKEN:
        raise ImportError(f"{_KERNEL_MODULE}: undefined symbol: {_MISSING_SYMBOL}")
