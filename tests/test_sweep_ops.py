"""Every op the sweep times, one small row each on an sm_90 GPU (skipped without one): the row is
timed against its baselines, checked against float64, and its columns filled as the summary reads them."""
import math

import pytest
import torch

from fused_gemm.bench import catalog, sweep

pytestmark = pytest.mark.gpu

CASES = [  # (op, preset, M)
    ("linear", "custom:256x512", 7),
    ("gated", "custom:256x512", 129),
    ("qkv_rope", "llama3-70b-tp8", 7),
    ("attention", "llama3-70b-tp8", 1000),
    ("attention", "llama3-70b-tp8", 16),          # on the decode kernel
    ("decode_attention", "llama3-70b-tp8", 1000),
]


@pytest.mark.parametrize("op, preset, m", CASES)
def test_sweep_row(op, preset, m):
    ceilings = sweep.Ceilings(copy_gbps=3000.0, mm_tflops=700.0)   # what the sweep measures first; not under test
    layer, n, k = catalog.OPS[op].layers(preset)[0]
    row = sweep.run_row(op, catalog.OPS[op].default_epilogue, torch.bfloat16, preset, layer, n, k, m, ceilings, False)
    base = sweep.primary_baseline(row)
    assert row["ok"], row
    assert row["ours_us"] > 0 and math.isfinite(row[f"speedup_vs_{base}"]), row
    if op == "attention":
        assert base == "sdpa" and "(sdpa: " in row["kernel"]
        assert row["kernel"].startswith("decode_" if m <= 16 else "attention_"), row["kernel"]
    if op == "decode_attention":
        assert row["timing"] == "graph" and math.isfinite(row["floor_ratio"])   # the K + V floor at every length
    if op == "qkv_rope":
        assert math.isfinite(row["speedup_vs_eager"])
