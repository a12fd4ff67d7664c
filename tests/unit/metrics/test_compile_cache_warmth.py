"""The compile caches a start finds: warm when every folder the unit names holds a file."""
from ansible_collections.sglang_ops.serving.plugins.module_utils.host.compile_cache_warmth import compile_cache_warmth


def test_warm_cold_or_partial_by_the_folders_the_environment_names(tmp_path):
    dg, triton = tmp_path / "deep_gemm", tmp_path / "triton"
    (dg / "kernels").mkdir(parents=True)
    triton.mkdir()
    env = {"SGLANG_DG_CACHE_DIR": str(dg), "TRITON_CACHE_DIR": str(triton), "HOME": str(tmp_path)}
    assert compile_cache_warmth(env) == "cold"                  # folders, but no kernel in them
    (dg / "kernels" / "gemm.cubin").write_bytes(b"\0")
    assert compile_cache_warmth(env) == "partial"
    (triton / "ab12").mkdir()
    (triton / "ab12" / "kernel.json").write_text("{}")
    assert compile_cache_warmth(env) == "warm"
    env["CUDA_CACHE_PATH"] = str(tmp_path / "missing")          # a folder the server has not made yet
    assert compile_cache_warmth(env) == "partial"


def test_an_environment_naming_no_cache_folder_says_nothing():
    assert compile_cache_warmth({"PATH": "/usr/bin"}) is None
    assert compile_cache_warmth({"SGLANG_CACHE_DIR": ""}) is None
