"""The watch loop lives in module_utils (the unit's supervisor runs it on the host too);
this name stays for the controller-side code that imports it."""
from ansible_collections.sglang_ops.serving.plugins.module_utils.restart_watch import (  # noqa: F401
    FINAL_VERDICTS, StartWatch, WatchOutcome, completion_ok)
