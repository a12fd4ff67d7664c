"""The detokenizer process of the SGLang stand-in (title `sglang::detokenizer`)."""
from sglang.standin.procs import child_setup, sleep_forever


def child_main(spec):
    child_setup(spec, comm=spec["title"])
    sleep_forever()
