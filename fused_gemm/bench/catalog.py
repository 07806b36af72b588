"""The ops the sweep can time: per op, its case maker, its default epilogue (or option) column, the
layers it takes from a shape preset, and the geometry beyond N x K that its maker needs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Tuple

from . import attention_ops, ops
from .models import MODELS, layers, model


def _no_geometry(preset: str) -> dict:
    return {}


@dataclass(frozen=True)
class SweepOp:
    make: Callable[..., ops.Case]
    default_epilogue: str
    layers: Callable[[str], List[Tuple[str, int, int]]]   # preset -> (name, N, K)
    geometry: Callable[[str], dict] = _no_geometry       # preset -> the maker's keyword arguments


def _mlp_layers(preset: str):
    if preset in MODELS:
        i, h = MODELS[preset].mlp()
        return [("mlp", i, h)]
    return layers(preset)


def _heads(op: str) -> Callable[[str], dict]:
    def geometry(preset: str) -> dict:
        heads, kv_heads, head_dim = model(preset, op).attention()
        return {"heads": heads, "kv_heads": kv_heads, "head_dim": head_dim}
    return geometry


def _qkv_layer(preset: str):
    return [layer for layer in model(preset, "qkv_rope").layers() if layer[0] == "qkv"]


def _attention_layer(op: str) -> Callable[[str], List[Tuple[str, int, int]]]:
    def attention_layers(preset: str):
        heads, kv_heads, d = model(preset, op).attention()
        return [(f"h{heads}_kv{kv_heads}_d{d}", heads * d, kv_heads * d)]   # N, K: the q and the k/v widths
    return attention_layers


OPS: Dict[str, SweepOp] = {
    "linear": SweepOp(ops.linear_case, "bias+gelu_tanh", layers),
    "gated": SweepOp(ops.gated_case, "silu", _mlp_layers),
    "fp8": SweepOp(ops.fp8_case, "row_scale+col_scale", layers),
    "int4": SweepOp(ops.int4_case, "none", layers),
    "fp8_weight": SweepOp(ops.fp8_weight_case, "none", layers),
    "qkv_rope": SweepOp(ops.qkv_rope_case, "neox", _qkv_layer, _heads("qkv_rope")),
    "attention": SweepOp(attention_ops.attention_case, "causal", _attention_layer("attention"), _heads("attention")),
    "decode_attention": SweepOp(attention_ops.decode_attention_case, "b32", _attention_layer("decode_attention"),
                                _heads("decode_attention")),
}
