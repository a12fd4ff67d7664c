"""What the weight cache daemon and the engine of the SGLang stand-in agree on: the
CacheConfig fingerprint (fields as SGLang 0.5.23's CacheConfig), the quantization method
both resolve (the allowlist is in sglang/srt/weight_cache/protocol.py, as in SGLang) and
the number of tensors a model exports.

Both sides build the fingerprint here from their own flags and the model folder's
config.json, so a daemon and an engine started with different --model-path, --tp-size,
--dtype, --quantization or --revision do not match, as in SGLang.
"""
import hashlib
import json

# Where SGLang has them: the allowlist and its check live in sglang.srt.weight_cache.protocol.
from sglang.srt.weight_cache.protocol import UnsupportedQuantForIPCError, check_ipc_quant_support  # noqa: F401

# What torch of the stand-in's "GPU" reports (RTX PRO 6000 Blackwell: compute capability 12.0).
DEVICE_CAPABILITY = "12.0"
TORCH_VERSION = "2.9.1+cu130"
_DTYPES = {"half": "float16", "float16": "float16", "float": "float32", "float32": "float32",
           "bfloat16": "bfloat16"}


def quant_of(quantization, model_cfg):
    """(quant_method, quantization_config) as SGLang resolves them for the fingerprint."""
    quant_config = model_cfg.get("quantization_config")
    method = quantization or ""
    if not method and isinstance(quant_config, dict):
        method = quant_config.get("quant_method") or ""
    return method, quant_config


def hash_quant_config(quant_config):
    if quant_config is None:
        return ""
    text = json.dumps(quant_config, sort_keys=True) if isinstance(quant_config, dict) else type(quant_config).__name__
    return hashlib.sha256(text.encode()).hexdigest()


def torch_dtype(dtype_flag, model_cfg):
    if dtype_flag and dtype_flag != "auto":
        return "torch." + _DTYPES.get(dtype_flag, dtype_flag)
    return "torch." + str(model_cfg.get("torch_dtype", "bfloat16"))


def cache_config(*, model_path, model_cfg, tp_size, tp_rank, pp_size=1, pp_rank=0, dp_size=1,
                 ep_size=1, enable_dp_attention=False, quantization=None, dtype="auto", revision=None):
    """The fingerprint, a dict in CacheConfig's field order."""
    method, quant_config = quant_of(quantization, model_cfg)
    return {
        "model_path": model_path,
        "model_arch": (model_cfg.get("architectures") or [""])[0],
        "tp_size": tp_size, "tp_rank": tp_rank, "pp_size": pp_size, "pp_rank": pp_rank,
        "dp_size": dp_size, "ep_size": ep_size, "moe_dp_size": 1, "moe_dp_rank": 0,
        "moe_ep_rank": tp_rank % ep_size if ep_size > 1 else 0,
        "attn_dp_size": dp_size if enable_dp_attention else 1,
        "enable_dp_lm_head": False, "attn_cp_size": 1, "moe_dense_tp_size": None,
        "moe_a2a_backend": "none", "quant_method": method,
        "quant_config_hash": hash_quant_config(quant_config),
        "dtype": torch_dtype(dtype, model_cfg), "revision": revision or "",
        "device_capability": DEVICE_CAPABILITY, "torch_version": TORCH_VERSION,
    }


def config_of_args(args, model_cfg, tp_rank, pp_rank=0):
    """The fingerprint from parsed server flags (the daemon's or the engine's)."""
    return cache_config(model_path=args.model_path, model_cfg=model_cfg, tp_size=args.tp_size,
                        tp_rank=tp_rank, pp_size=args.pp_size, pp_rank=pp_rank, dp_size=args.dp_size,
                        ep_size=args.ep_size, enable_dp_attention=args.enable_dp_attention,
                        quantization=args.quantization, dtype=args.dtype, revision=args.revision)


def tensor_count(model_cfg):
    """Tensors one rank exports: every layer's parameters and buffers, embeddings, head."""
    layers = int(model_cfg.get("num_hidden_layers") or 61)
    return layers * 21 + 4
