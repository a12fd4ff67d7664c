"""Make the collection importable as ansible_collections.sglang_ops.serving in tests."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (os.path.join(ROOT, "collections"), ROOT):
    if path not in sys.path:
        sys.path.insert(0, path)
