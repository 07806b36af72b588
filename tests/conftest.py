import os

import pytest
import torch


def _has_sm90() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def _has_toolchain() -> bool:
    try:
        from fused_gemm.generator.toolchain import find_cutlass, find_nvcc
        find_nvcc()
        find_cutlass()
        return True
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs an sm_90 GPU (H100/H200)")
    skip_nvcc = pytest.mark.skip(reason="needs nvcc and the CUTLASS headers (pip install nvidia-cutlass)")
    skip_offline = pytest.mark.skip(reason="FUSED_GEMM_OFFLINE is set: no package index to install wheels from")
    gpu, toolchain = _has_sm90(), _has_toolchain()
    offline = os.environ.get("FUSED_GEMM_OFFLINE")
    for item in items:
        if "gpu" in item.keywords and not gpu:
            item.add_marker(skip_gpu)
        if ("compile" in item.keywords or "gpu" in item.keywords) and not toolchain:
            item.add_marker(skip_nvcc)
        if "toolchain" in item.keywords and offline:
            item.add_marker(skip_offline)


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    """A private, empty kernel cache for tests that build."""
    monkeypatch.setenv("FUSED_GEMM_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"
