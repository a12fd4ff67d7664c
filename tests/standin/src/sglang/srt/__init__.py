"""SGLang stand-in (test double): the `sglang.srt` namespace, flags only."""
