"""The weight shapes of models users run: what the sweep and the tuner time.  Plain data.

Each layer is (name, N, K) of an nn.Linear weight [N, K] as one GPU holds it (tensor-parallel
presets are one shard).  The gated MLP appears three ways: gate and up each (two linears),
gate_up concatenated (one linear, as vLLM fuses them), and down.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Tuple

from ..generator.gemm.tuned import M_BUCKETS

Layer = Tuple[str, int, int]


@dataclass(frozen=True)
class Model:
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    tp: int = 1

    def layers(self) -> List[Layer]:
        h = self.hidden
        q, kv, d = self.attention()   # the QKV shard holds the GPU's KV heads, replicated ones included
        i = self.intermediate // self.tp
        return [("qkv", (q + 2 * kv) * d, h), ("o", h, q * d), ("gate_up", 2 * i, h), ("up", i, h), ("down", h, i)]

    def attention(self) -> Tuple[int, int, int]:
        """(q heads, kv heads, head dim) on one GPU: the attention ops' geometry (a KV head that tensor
        parallelism cannot split is replicated)."""
        return self.heads // self.tp, max(1, self.kv_heads // self.tp), self.head_dim

    def mlp(self) -> Tuple[int, int]:
        """(intermediate per GPU, hidden): the gated GEMM's shape."""
        return self.intermediate // self.tp, self.hidden


MODELS: Dict[str, Model] = {
    "llama3-8b": Model(4096, 32, 8, 128, 14336),
    "llama3-70b-tp8": Model(8192, 64, 8, 128, 28672, tp=8),
    "mistral-7b": Model(4096, 32, 8, 128, 14336),
    "qwen2.5-7b": Model(3584, 28, 4, 128, 18944),
}
SQUARE: Dict[str, List[Layer]] = {"square-8192": [("square", 8192, 8192)], "square-4096": [("square", 4096, 4096)]}
M_VALUES = M_BUCKETS              # the sweep's default M: the buckets the tables are tuned at
# the ops fused_gemm.bench.catalog names (here so that the CLI needs no torch)
SWEEP_OPS = ("linear", "gated", "fp8", "int4", "fp8_weight", "qkv_rope", "attention", "decode_attention")
PRESETS = sorted(MODELS) + sorted(SQUARE)


def layers(preset: str) -> List[Layer]:
    """A preset's layers; also 'custom:NxK,NxK,...'."""
    if preset in MODELS:
        return MODELS[preset].layers()
    if preset in SQUARE:
        return SQUARE[preset]
    if preset.startswith("custom:"):
        out = []
        for item in preset[len("custom:"):].split(","):
            n, _, k = item.partition("x")
            out.append((f"{n}x{k}", int(n), int(k)))
        return out
    raise ValueError(f"unknown shape preset {preset!r}; presets: {PRESETS} or custom:NxK,...")


def model(preset: str, op: str) -> Model:
    """The model behind a preset, for ops that need its heads (a bare shape preset has none)."""
    if preset not in MODELS:
        raise ValueError(f"{op} sweeps model presets (it needs their heads): {sorted(MODELS)}, not {preset!r}")
    return MODELS[preset]


def unique_shapes(presets) -> List[Layer]:
    """Every (N, K) of the presets once, named after the first layer that has it."""
    seen: Dict[Tuple[int, int], Layer] = {}
    for p in presets:
        for name, n, k in layers(p):
            seen.setdefault((n, k), (f"{p}/{name}", n, k))
    return list(seen.values())
