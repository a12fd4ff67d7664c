"""The weight cache of SGLang 0.5.23 as the SGLang stand-in (test double) plays it."""
