#!/usr/bin/env python3
"""Turn a trace recorded on the GPU machine into a corpus file, saying in its header what
was done to it (`derived`):

  label SRC DEST --name N --description TEXT --expect JSON
      a trace the supervisor wrote (no label of its own): the same observations, with
      the given name, words and label.
  drop-power SRC DEST --name N --description TEXT
      the blind twin: every GPU reading without `power_w`, which is what the probe
      records when nvidia-smi prints [N/A] for power.draw (host/nvidia_smi.py); all
      else, the label included, as recorded.

Usage: python3 tests/gpu/derive_trace.py label|drop-power SRC DEST [options]
"""
import argparse
import json
import os


def read(path):
    with open(path, encoding="utf-8") as fh:
        lines = [json.loads(line) for line in fh if line.strip()]
    if not lines or lines[0].get("format") != "sglang-trace/1":
        raise SystemExit("%s: not an sglang-trace/1 file" % path)
    return lines[0], lines[1:]


def write(path, header, observations):
    with open(path, "w", encoding="utf-8") as fh:
        for obj in [header] + observations:
            fh.write(json.dumps(obj) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("label", "drop-power"))
    ap.add_argument("src")
    ap.add_argument("dest")
    ap.add_argument("--name", required=True)
    ap.add_argument("--description", required=True)
    ap.add_argument("--expect", help="label: the label, a JSON object")
    a = ap.parse_args(argv)
    header, observations = read(a.src)
    source = header.get("name") or os.path.basename(a.src)
    header = dict(header, name=a.name, description=a.description)
    if a.what == "label":
        if not a.expect:
            ap.error("label needs --expect")
        header["expect"] = json.loads(a.expect)
        header["derived"] = {"from": source, "how": "recorded by the supervisor (--once); name, description and "
                                                    "label added afterwards, observations unchanged"}
    else:
        dropped = 0
        for obs in observations:
            for gpu in obs.get("gpus") or ():
                dropped += gpu.pop("power_w", None) is not None
        if not dropped:
            raise SystemExit("%s: no power readings to drop" % a.src)
        header["derived"] = {"from": source, "how": "power_w removed from every GPU reading (%d readings), as the "
                                                    "probe records a board that prints [N/A] for power.draw; all "
                                                    "else as recorded" % dropped}
    write(a.dest, header, observations)


if __name__ == "__main__":
    main()
