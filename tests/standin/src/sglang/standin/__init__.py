"""Internals of the SGLang stand-in (test double); not part of real SGLang."""
