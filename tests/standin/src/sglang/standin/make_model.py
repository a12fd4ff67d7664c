"""`sglang-standin-make-model DIR --shards N --shard-mib M [--quantization Q]` (SGLang stand-in helper).

Writes a model folder the SGLang stand-in can load: config.json, N shard files of
real random bytes (model-0000i-of-0000N.safetensors) and an index file. config.json says
which quantization the model has (`quantization_config`, absent when unquantized). Files are
fsynced so that a later load reads from storage, not from dirty page cache.
"""
import argparse
import json
import os
import sys

MIB = 1024 * 1024

# --quantization: the quantization_config a checkpoint of that kind carries in config.json
# (none: an unquantized bfloat16 checkpoint has no quantization_config).
QUANTIZATIONS = {
    "none": None,
    # Kimi K2.6's INT4 checkpoint: compressed-tensors, 4-bit packed integer weights.
    "int4": {"quant_method": "compressed-tensors", "format": "pack-quantized",
             "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                 "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 32}}},
             "ignore": ["lm_head"]},
    "fp8-block": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                  "weight_block_size": [128, 128]},
    "fp8-tensor": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "static"},
}


def make_model(path, shards, shard_mib, architecture="DeepseekV3ForCausalLM", model_type="kimi_k2",
               context_length=262144, quantization="none"):
    os.makedirs(path, exist_ok=True)
    config = {"architectures": [architecture], "model_type": model_type, "torch_dtype": "bfloat16",
              "max_position_embeddings": context_length,
              "sglang_standin": "test model written by sglang-standin-make-model"}
    if QUANTIZATIONS[quantization] is not None:
        config["quantization_config"] = QUANTIZATIONS[quantization]
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
    p.add_argument("--quantization", choices=sorted(QUANTIZATIONS), default="none",
                   help="the quantization config.json declares (none: unquantized bfloat16)")
    a = p.parse_args(argv)
    if a.shards < 1 or a.shard_mib <= 0:
        p.error("--shards must be >= 1 and --shard-mib > 0")
    make_model(a.path, a.shards, a.shard_mib, a.architecture, a.model_type, a.context_length, a.quantization)
    print(a.path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
