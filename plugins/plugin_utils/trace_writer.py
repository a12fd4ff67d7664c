"""The trace writer lives in module_utils (the unit's supervisor writes traces on the
host too); this name stays for the controller-side code that imports it."""
from ansible_collections.sglang_ops.serving.plugins.module_utils.trace_writer import (  # noqa: F401
    TRACE_FORMAT, TraceWriter, read_trace, relative_observation, trace_header)
