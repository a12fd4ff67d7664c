"""Helpers of the SGLang stand-in (test double), where SGLang 0.5.23 keeps them."""
