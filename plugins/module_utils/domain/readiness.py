"""When a start is ready, and the words saying how it was found ready. Pure, no I/O.

A completion that answered is ready; so is /health answering 200 after SGLang's ready line,
unless the settings require a completion. The weight cache daemon serves no HTTP: it is ready
when every GPU's ready file has a live pid.
"""


def _weight_cache(obs):
    """The weight cache daemon's readiness of an observation of the daemon (no `http`), else None."""
    cache = obs.get("weight_cache")
    return cache if isinstance(cache, dict) and "http" not in obs else None


def is_ready(obs, settings, ready_line):
    """Whether this observation shows the start ready; `ready_line`: the log printed SGLang's ready line."""
    cache = _weight_cache(obs)
    if cache is not None:
        # the weight cache daemon serves no HTTP: ready is every GPU's ready file with a live pid
        return cache.get("healthy") is True
    http = obs.get("http")
    if not isinstance(http, dict):
        return False
    comp = http.get("completion")
    if isinstance(comp, dict) and comp.get("ok"):
        return True
    return (not settings.ready_requires_completion and http.get("health") == 200 and ready_line
            and not isinstance(comp, dict))


def ready_reason(obs):
    """The ready verdict's reason."""
    cache = _weight_cache(obs)
    if cache is not None:
        return "weight cache ready on %s GPUs" % cache.get("ready")
    comp = (obs.get("http") or {}).get("completion") or {}
    if comp.get("ok"):
        return "a completion succeeded (%s ms)" % comp.get("ms")
    return "/health answered 200 after the ready line"


def ready_rule(obs):
    """What said ready, for evidence["rule"]."""
    if (obs.get("http") or {}).get("completion"):
        return "a completion answered"
    if "http" not in obs:
        return "every GPU's weight cache daemon ready"
    return "/health after the ready line"
