"""SGLang stand-in (test double): the `sglang` console script."""
