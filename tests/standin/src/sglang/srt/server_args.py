"""Server flags of SGLang 0.5.23, as the SGLang stand-in (test double) parses them.

argparse with allow_abbrev (the default), as in SGLang, so `--tp 8` resolves to
`--tp-size` and `--cuda-graph-max-bs` is ambiguous between the -decode and -prefill
flags. Flags beyond the ones the project renders are listed (names, choices and defaults as
in the 0.5.23 wheel) so that abbreviations resolve as they do there: `--tp` is unique,
`--cuda-graph-max-bs`, `--cuda-graph-bs`, `--context` and `--trust` are ambiguous.
`--tool-call-parser` / `--reasoning-parser` accept any name here (0.5.23 checks a list).
"""
import argparse

SPECULATIVE_ALGORITHMS = ["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO"]
LOAD_FORMATS = ["auto", "pt", "safetensors", "instanttensor", "npcache", "dummy", "sharded_state",
                "presharded", "gguf", "expert_pack", "bitsandbytes", "mistral", "layered", "flash_rl",
                "remote", "remote_instance", "fastsafetensors", "private", "runai_streamer"]
KV_CACHE_DTYPES = ["auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16"]


class ServerArgs:
    """The entry point SGLang offers for its flags, as the stand-in's one list of them."""

    @staticmethod
    def add_cli_args(parser):
        a = parser.add_argument
        # Model and tokenizer
        a("--model-path", "--model", type=str, required=True,
          help="The path of the model weights (a local folder for the stand-in).")
        a("--tokenizer-path", type=str, default=None)
        a("--tokenizer-mode", type=str, default="auto", choices=["auto", "slow"])
        a("--skip-tokenizer-init", action="store_true")
        a("--load-format", type=str, default="auto", choices=LOAD_FORMATS)
        a("--model-loader-extra-config", type=str, default="{}",
          help="Extra config for the model loader, as a JSON string.")
        a("--trust-remote-code", action="store_true")
        a("--trust-request-chat-template", action="store_true")
        a("--model-impl", type=str, default="auto")
        a("--context-length", type=int, default=None)
        a("--context-bucket", dest="cuda_graph_prefill_max_context", type=int, default=None)
        a("--is-embedding", action="store_true")
        a("--revision", type=str, default=None)
        a("--dtype", type=str, default="auto")
        a("--quantization", type=str, default=None)
        a("--kv-cache-dtype", type=str, default="auto", choices=KV_CACHE_DTYPES)
        a("--served-model-name", type=str, default=None)
        a("--chat-template", type=str, default=None)
        a("--download-dir", type=str, default=None)
        # Weight cache (0.5.23: `client` attaches to a standalone weight cache daemon)
        a("--weight-cache-mode", type=str, default="off", choices=["off", "daemon", "client"])
        a("--weight-cache-socket", type=str, default=None)
        a("--weight-cache-timeout", type=int, default=1800)
        # HTTP server
        a("--host", type=str, default="127.0.0.1")
        a("--port", type=int, default=30000)
        a("--api-key", type=str, default=None)
        a("--enable-metrics", action="store_true")
        a("--enable-metrics-for-all-schedulers", action="store_true")
        a("--log-level", type=str, default="info")
        a("--log-level-http", type=str, default=None)
        a("--log-requests", action="store_true")
        a("--show-time-cost", action="store_true")
        a("--file-storage-path", type=str, default=None)
        # Memory and scheduling
        a("--mem-fraction-static", type=float, default=None)
        a("--max-running-requests", type=int, default=None)
        a("--max-total-tokens", type=int, default=None)
        a("--chunked-prefill-size", type=int, default=None)
        a("--max-prefill-tokens", type=int, default=16384)
        a("--schedule-policy", type=str, default="fcfs")
        a("--page-size", type=int, default=None)
        a("--stream-interval", type=int, default=1)
        a("--random-seed", type=int, default=None)
        a("--watchdog-timeout", type=float, default=300)
        a("--soft-watchdog-timeout", type=float, default=None)
        a("--dist-timeout", type=int, default=None)
        a("--decode-log-interval", type=int, default=40)
        # Parallelism
        a("--tp-size", "--tensor-parallel-size", type=int, default=1)
        a("--dp-size", "--data-parallel-size", type=int, default=1)
        a("--pp-size", "--pipeline-parallel-size", type=int, default=1)
        a("--ep-size", "--expert-parallel-size", type=int, default=1)
        a("--nnodes", type=int, default=1)
        a("--node-rank", type=int, default=0)
        a("--dist-init-addr", "--nccl-init-addr", type=str, default=None)
        a("--nccl-port", type=int, default=None)
        a("--base-gpu-id", type=int, default=0)
        a("--gpu-id-step", type=int, default=1)
        a("--enable-dp-attention", action="store_true")
        # Kernels and graphs
        a("--attention-backend", type=str, default=None)
        a("--sampling-backend", type=str, default=None)
        a("--grammar-backend", type=str, default=None)
        a("--moe-runner-backend", type=str, default="auto")
        a("--disable-cuda-graph", action="store_true")
        a("--disable-cuda-graph-padding", action="store_true")
        a("--cuda-graph-config", type=str, default=None)
        a("--cuda-graph-bs-decode", type=int, nargs="+", default=None)
        a("--cuda-graph-bs-prefill", type=int, nargs="+", default=None)
        a("--cuda-graph-max-bs-decode", type=int, default=None)
        a("--cuda-graph-max-bs-prefill", type=int, default=None)
        a("--disable-custom-all-reduce", action="store_true")
        a("--disable-radix-cache", action="store_true")
        a("--enable-torch-compile", action="store_true")
        a("--torch-compile-max-bs", type=int, default=32)
        a("--enable-mixed-chunk", action="store_true")
        a("--enable-two-batch-overlap", action="store_true")
        a("--enable-hierarchical-cache", action="store_true")
        # Speculative decoding
        a("--speculative-algorithm", type=str, default=None, choices=SPECULATIVE_ALGORITHMS)
        a("--speculative-draft-model-path", "--speculative-draft-model", type=str, default=None)
        a("--speculative-draft-model-revision", type=str, default=None)
        a("--speculative-draft-load-format", type=str, default=None, choices=LOAD_FORMATS)
        a("--speculative-num-steps", type=int, default=None)
        a("--speculative-eagle-topk", type=int, default=None)
        a("--speculative-num-draft-tokens", type=int, default=None)
        # Parsers
        a("--tool-call-parser", type=str, default=None)
        a("--reasoning-parser", type=str, default=None)
        a("--enable-lora", action="store_true", default=None)
        a("--config", type=str, help="Read CLI options from a config file. Must be a YAML file with configuration options.")


def make_parser(prog="launch_server.py"):
    p = argparse.ArgumentParser(prog=prog)
    ServerArgs.add_cli_args(p)
    return p


def parse_args(argv, prog="launch_server.py"):
    """The server's arguments, a --config YAML file merged in first as 0.5.23's
    prepare_server_args does (sglang/srt/utils/server_args_config_parser.py)."""
    parser = make_parser(prog)
    if "--config" in argv:
        from sglang.srt.utils.server_args_config_parser import ConfigArgumentMerger
        argv = ConfigArgumentMerger(parser).merge_config_with_args(argv)
    args = parser.parse_args(argv)
    check_combinations(args)
    return args


def check_combinations(args):
    """Combinations 0.5.23 refuses while it resolves the flags (an uncaught ValueError)."""
    if args.weight_cache_mode != "off" and args.speculative_algorithm is not None:
        raise ValueError(
            "--weight-cache-mode is not supported together with speculative "
            "decoding (--speculative-algorithm): the weight cache daemon does "
            "not export the draft model's weights. Disable one of them "
            "(--weight-cache-mode off) for this configuration.")
