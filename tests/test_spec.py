"""Spec model: validation, the recipe string form, URIs, hashing."""
import pytest

from fused_gemm.generator import Epilogue, GemmSpec, SpecError, TileConfig


@pytest.mark.parametrize("text", [
    "none", "bias", "bias+gelu_tanh", "bias+silu+residual", "row_scale+col_scale",
    "row_scale+col_scale+bias+sigmoid+residual", "relu", "residual", "gelu",
])
def test_epilogue_string_round_trips(text):
    assert Epilogue.parse(text).name == text
    assert Epilogue.parse(Epilogue.parse(text).name) == Epilogue.parse(text)


@pytest.mark.parametrize("text, fragment", [
    ("bias+swish", "unknown step 'swish'"),
    ("silu+bias", "out of order"),
    ("bias+bias", "repeated"),
    ("relu+gelu", "repeated"),
])
def test_bad_epilogue_strings_say_what_is_wrong(text, fragment):
    with pytest.raises(SpecError, match=fragment):
        Epilogue.parse(text)


def test_spec_is_frozen_hashable_and_canonical():
    a = GemmSpec("bfloat16", epilogue="bias+gelu_tanh")
    b = GemmSpec("bf16", out_dtype="bf16", bias_dtype="bf16", epilogue=Epilogue(bias=True, activation="gelu_tanh"))
    assert a == b and hash(a) == hash(b)
    assert len({a, b}) == 1
    with pytest.raises(Exception):
        a.dtype = "fp16"


def test_uri_names_every_parameter():
    spec = GemmSpec("fp16", out_dtype="fp32", b_layout="kn", epilogue="bias+silu+residual",
                    config=TileConfig((128, 16, 128), (1, 1, 1), "cooperative", "stream_k", swap_ab=True))
    uri = spec.uri
    for part in ("sm90a", "fp16_fp32", "cfp32", "biasfp16", "bkn", "t128x16x128", "c1x1x1", "coop",
                 "streamk", "swapab", "bias-silu-residual"):
        assert part in uri
    assert "/" not in uri and " " not in uri and "+" not in uri
    other = GemmSpec("fp16", out_dtype="fp32", b_layout="kn", epilogue="bias+silu+residual")
    assert other.uri != uri


@pytest.mark.parametrize("kwargs, fragment", [
    ({"dtype": "fp32"}, "A and B"),
    ({"dtype": "int8"}, "unknown dtype"),
    ({"out_dtype": "fp64"}, "unknown dtype"),
    ({"b_layout": "mn"}, "b_layout"),
    ({"arch": "sm80"}, "planned"),
    ({"arch": "sm75"}, "not supported"),
])
def test_bad_specs_raise(kwargs, fragment):
    with pytest.raises(SpecError, match=fragment):
        GemmSpec(**kwargs)


@pytest.mark.parametrize("kwargs, fragment", [
    ({"tile": (96, 128, 64)}, "tile M"),
    ({"tile": (128, 100, 64)}, "tile N"),
    ({"tile": (128, 128, 48)}, "tile K"),
    ({"tile": (64, 128, 64), "schedule": "cooperative"}, "cooperative"),
    ({"cluster": (4, 2, 1)}, "cluster"),
    ({"schedule": "warp"}, "schedule"),
    ({"scheduler": "stream_k", "schedule": "pingpong"}, "stream-K"),
])
def test_bad_tile_configs_raise(kwargs, fragment):
    with pytest.raises(SpecError, match=fragment):
        TileConfig(**kwargs)


def test_spec_error_is_a_value_error():
    assert issubclass(SpecError, ValueError)
