"""Named lists of int4-family specs (`fused-gemm build --preset ...`): 'int4-gpu-tests' is what
tests/test_int4.py runs on a GPU, 'int4-bench' what perf/bench_int4.py times, 'int4-sweep' the
alternatives its --sweep times; 'int4-gated-tests' and 'int4-gated-bench' the same for
int4_gated_linear (perf/bench_int4_gated.py); 'fp8-weight-gpu-tests', 'fp8-weight-bench' and
'fp8-weight-sweep' the same for the e4m3 weights of fp8_weight_linear (tests/test_fp8_weight.py,
perf/bench_fp8_weight.py)."""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

from ..gemm.spec import Epilogue, canonical_dtype
from .heuristics import (DECODE_SWEEP_CONFIGS, GATED, config_for, rules, shape_class, shape_classes,
                         sweep_configs)
from .spec import FP8_WEIGHTS, DecodeConfig, Int4Spec

# (dtype, weight, epilogue, group size) sets the GPU tests run at every M bucket, on weights of TEST_SHAPE (N, K).
TEST_SHAPE = (272, 512)
TEST_GROUPS = (64, 128)                   # and per channel (group size = K), served by the group-128 kernels
TEST_FULL_EPILOGUE = "bias+gelu_tanh+residual"
DECODE_TEST_EPILOGUE = "bias+silu+residual"   # tests/test_int4.py's K-split cases (decode kernels only)
# ... which also run these directly: one- and two-block CTAs (other register stages)
SMALL_BLOCK_DECODE_CONFIGS = (DecodeConfig(8, 4, 1), DecodeConfig(16, 2, 2))
# fp8_weight_linear's tests run each of these in bf16 and fp16 at every M bucket.
FP8_WEIGHT_TEST_EPILOGUES = ("none", "bias", "bias+silu", "residual", TEST_FULL_EPILOGUE)


def _specs(dtype, weight, epilogue, group_size, out_dtype, arch, classes, gated=False) -> List[Int4Spec]:
    ep = Epilogue.parse(epilogue)
    k = 1 << 40   # a K no group equals: the group size alone decides the tile K
    group = k if canonical_dtype(weight) in FP8_WEIGHTS else group_size
    specs = (Int4Spec(dtype, weight, out_dtype, epilogue=ep, config=config_for(rule, group, k), arch=arch, gated=gated)
             for c in classes for rule in rules(arch, canonical_dtype(weight), c))
    return list(dict.fromkeys(specs))


def int4_specs(dtype: str = "bf16", weight: str = "s4", epilogue: str = "none", group_size: int = 128,
               out_dtype: Optional[str] = None, arch: str = "sm90a",
               shape: Optional[Tuple[int, int]] = None) -> List[Int4Spec]:
    """The kernels ``int4_linear`` (or, for weight 'e4m3', ``fp8_weight_linear``) uses for these
    arguments and a weight of ``shape`` (N, K), one per M bucket of its table; shape None: for every
    weight (its decode rows depend on the shape: heuristics.DECODE_BY_SHAPE).  For a per-channel int4 weight
    pass any group size that is a multiple of 128; an e4m3 weight is always per channel and ignores it."""
    classes = shape_classes(weight, arch) if shape is None else (shape_class(weight, *shape, arch=arch),)
    return _specs(dtype, weight, epilogue, group_size, out_dtype, arch, classes)


def int4_gated_specs(dtype: str = "bf16", weight: str = "s4", epilogue: str = "silu", group_size: int = 128,
                     arch: str = "sm90a") -> List[Int4Spec]:
    """The kernels ``int4_gated_linear`` uses for these arguments, one per M bucket of its table
    (the decode kernels' 8-block CTAs, a gate with its up)."""
    return _specs(dtype, weight, epilogue, group_size, None, arch, (GATED,), gated=True)


# (dtype, weight, epilogue) of tests/test_int4.py's gated cases.
GATED_TEST_CASES = (("bf16", "s4", "silu"), ("bf16", "u4", "silu+residual"), ("fp16", "s4", "gelu_tanh+residual"),
                    ("bf16", "s4", "bias+silu+residual"))


def fp8_weight_specs(dtype: str = "bf16", epilogue: str = "none", out_dtype: Optional[str] = None,
                     arch: str = "sm90a") -> List[Int4Spec]:
    """The kernels ``fp8_weight_linear`` uses for x of ``dtype`` and this epilogue, one per M bucket and, at
    M <= 16, decode shape class."""
    return int4_specs(dtype, "e4m3", epilogue, out_dtype=out_dtype, arch=arch)


def _gpu_tests() -> List[Int4Spec]:
    specs = []
    for dtype in ("bf16", "fp16"):
        for weight in ("s4", "u4"):
            specs += int4_specs(dtype, weight, TEST_FULL_EPILOGUE, shape=TEST_SHAPE)
    for weight in ("s4", "u4"):
        for group in TEST_GROUPS:
            specs += int4_specs("bf16", weight, "none", group, shape=TEST_SHAPE)
        specs += [s for s in int4_specs("bf16", weight, DECODE_TEST_EPILOGUE) if s.decode]
        specs += [Int4Spec("bf16", weight, epilogue=Epilogue.parse(DECODE_TEST_EPILOGUE), config=c)
                  for c in SMALL_BLOCK_DECODE_CONFIGS]
    specs += [Int4Spec(dtype, "s4", config=c) for c in DECODE_SWEEP_CONFIGS for dtype in ("bf16", "fp16")]
    return specs


# tests/test_fp8_weight.py's weights: in the first decode shape class (its test of every decode row runs the
# others' kernels directly, with the full epilogue).
FP8_WEIGHT_TEST_SHAPE = (200, 512)


def fp8_decode_configs(arch: str = "sm90a") -> Tuple[DecodeConfig, ...]:
    """Every decode config of fp8_weight_linear's table (all shape classes)."""
    return tuple(dict.fromkeys(rule.config for c in shape_classes("e4m3", arch) for rule in rules(arch, "e4m3", c)
                               if isinstance(rule.config, DecodeConfig)))


def _fp8_weight_gpu_tests() -> List[Int4Spec]:
    specs = [s for dtype in ("bf16", "fp16") for ep in FP8_WEIGHT_TEST_EPILOGUES
             for s in int4_specs(dtype, "e4m3", ep, shape=FP8_WEIGHT_TEST_SHAPE)]
    full = Epilogue.parse(TEST_FULL_EPILOGUE)
    return specs + [Int4Spec(dtype, "e4m3", epilogue=full, config=c) for c in fp8_decode_configs()
                    for dtype in ("bf16", "fp16")]


PRESETS: Dict[str, Callable[[], List[Int4Spec]]] = {
    "int4-gpu-tests": _gpu_tests,
    "int4-gated-tests": lambda: [s for case in GATED_TEST_CASES for s in int4_gated_specs(*case)],
    "int4-gated-bench": lambda: int4_gated_specs("bf16", "s4", "silu"),
    "int4-bench": lambda: int4_specs("bf16", "s4", "none", 128),
    "int4-sweep": lambda: [Int4Spec("bf16", "s4", config=c) for c in sweep_configs("s4")],
    # One mixed-input kernel and two decode kernels: the 16-token default (the most registers a thread) and the
    # table's first 16-warp one (at its 128-register cap: where a header change spills first).
    "int4-compile-ci": lambda: [int4_specs("bf16", "u4", TEST_FULL_EPILOGUE, shape=TEST_SHAPE)[2],
                                Int4Spec("bf16", "u4", epilogue=Epilogue.parse(TEST_FULL_EPILOGUE),
                                         config=DecodeConfig(16)),
                                int4_specs("bf16", "u4", TEST_FULL_EPILOGUE, shape=TEST_SHAPE)[0]],
    "fp8-weight-gpu-tests": _fp8_weight_gpu_tests,
    "fp8-weight-bench": lambda: fp8_weight_specs("bf16", "none"),
    "fp8-weight-sweep": lambda: [Int4Spec("bf16", "e4m3", config=c) for c in sweep_configs("e4m3")],
    # The mixed-input kernel of M <= 64 and the decode row with the most registers (16 tokens, three chunks a stage).
    "fp8-weight-compile-ci": lambda: [
        next(s for s in fp8_weight_specs("bf16", TEST_FULL_EPILOGUE) if not s.decode),
        Int4Spec("bf16", "e4m3", epilogue=Epilogue.parse(TEST_FULL_EPILOGUE), config=DecodeConfig(16, 4, 1, unroll=3))],
}
