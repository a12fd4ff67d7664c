"""`sglang-standin-make-model DIR --shards N --shard-mib M` (SGLang stand-in helper).

Writes a model folder the SGLang stand-in can load: config.json, N shard files of
real random bytes (model-0000i-of-0000N.safetensors) and an index file. Files are
fsynced so that a later load reads from storage, not from dirty page cache.
"""
import argparse
import json
import os
import sys

MIB = 1024 * 1024


def make_model(path, shards, shard_mib, architecture="DeepseekV3ForCausalLM", model_type="kimi_k2",
               context_length=262144):
    os.makedirs(path, exist_ok=True)
    config = {"architectures": [architecture], "model_type": model_type, "torch_dtype": "bfloat16",
              "max_position_embeddings": context_length,
              "sglang_standin": "test model written by sglang-standin-make-model"}
    with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    weight_map = {}
    names = []
    for i in range(shards):
        name = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        names.append(name)
        weight_map[f"model.layers.{i}.weight"] = name
        left = int(shard_mib * MIB)
        with open(os.path.join(path, name), "wb") as f:
            while left > 0:
                n = min(left, 4 * MIB)
                f.write(os.urandom(n))
                left -= n
            f.flush()
            os.fsync(f.fileno())
    with open(os.path.join(path, "model.safetensors.index.json"), "w", encoding="utf-8") as f:
        json.dump({"metadata": {"total_size": int(shards * shard_mib * MIB)}, "weight_map": weight_map}, f)
    return [os.path.join(path, n) for n in names]


def main(argv=None):
    p = argparse.ArgumentParser(prog="sglang-standin-make-model",
                                description="Write a model folder for the SGLang stand-in (random bytes).")
    p.add_argument("path")
    p.add_argument("--shards", type=int, default=8)
    p.add_argument("--shard-mib", type=float, default=16)
    p.add_argument("--architecture", default="DeepseekV3ForCausalLM")
    p.add_argument("--model-type", default="kimi_k2")
    p.add_argument("--context-length", type=int, default=262144)
    a = p.parse_args(argv)
    if a.shards < 1 or a.shard_mib <= 0:
        p.error("--shards must be >= 1 and --shard-mib > 0")
    make_model(a.path, a.shards, a.shard_mib, a.architecture, a.model_type, a.context_length)
    print(a.path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
