"""Make the collection importable as ansible_collections.sglang_ops.serving in tests; the
venv with the real pinned SGLang for the tests that compare with it."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (os.path.join(ROOT, "collections"), ROOT):
    if path not in sys.path:
        sys.path.insert(0, path)


@pytest.fixture(scope="session")
def real_sglang_python():
    """Python of the cached venv with the real pinned SGLang (tests/sglang_real/setup), built on
    first use: a test that compares with the real SGLang runs, never skips, on a fresh clone."""
    run = subprocess.run([os.path.join(ROOT, "tests", "sglang_real", "setup")], capture_output=True, text=True,
                         check=False)
    assert run.returncode == 0, "tests/sglang_real/setup failed:\n" + run.stderr[-3000:]
    return run.stdout.strip().splitlines()[-1]
