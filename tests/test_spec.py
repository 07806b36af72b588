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
        a.a_dtype = "fp16"


def test_uri_names_every_parameter():
    spec = GemmSpec("fp16", out_dtype="fp32", b_layout="kn", epilogue="bias+silu+residual",
                    config=TileConfig((128, 16, 128), (1, 1, 1), "cooperative", "stream_k", swap_ab=True))
    uri = spec.uri
    for part in ("sm90a", "a-fp16_b-fp16_d-fp32", "c-fp32", "bias-fp16", "w-kn", "t128x16x128", "c1x1x1", "coop",
                 "streamk", "swapab", "bias-silu-residual"):
        assert part in uri
    assert "/" not in uri and " " not in uri and "+" not in uri
    other = GemmSpec("fp16", out_dtype="fp32", b_layout="kn", epilogue="bias+silu+residual")
    assert other.uri != uri


@pytest.mark.parametrize("kwargs, fragment", [
    ({"a_dtype": "fp32"}, "no mainloop"),
    ({"a_dtype": "bf16", "b_dtype": "s4"}, "no mainloop"),
    ({"a_dtype": "e4m3", "b_dtype": "bf16"}, "no mainloop"),
    ({"a_dtype": "e5m2"}, "no mainloop"),
    ({"a_dtype": "int8"}, "unknown dtype"),
    ({"out_dtype": "fp64"}, "unknown dtype"),
    ({"b_layout": "mn"}, "b_layout"),
    ({"arch": "sm80"}, "planned"),
    ({"arch": "sm75"}, "not supported"),
    ({"a_dtype": "e4m3", "config": TileConfig((64, 64, 128), (1, 1, 1), "warpspecialized", "split_k_parallel")},
     "16-bit"),
    ({"epilogue": "a_scale", "config": TileConfig((64, 64, 128), (1, 1, 1), "warpspecialized", "split_k_parallel")},
     "per-tensor"),
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


def test_a_and_b_dtypes_are_separate_fields():
    spec = GemmSpec("fp16")
    assert (spec.a_dtype, spec.b_dtype, spec.out_dtype, spec.bias_dtype) == ("fp16",) * 4
    assert GemmSpec("bf16", "bf16") == GemmSpec("bf16")


def _every_preset_spec():
    from fused_gemm.generator.registry import FAMILIES, preset
    for family in FAMILIES.values():
        for name in family.presets:
            yield from preset(name)


def test_uri_round_trips_for_every_preset_spec():
    from fused_gemm.generator import spec_from_uri
    specs = list(_every_preset_spec())
    assert len(specs) > 50
    for spec in specs:
        assert type(spec).from_uri(spec.uri) == spec
        assert spec_from_uri(spec.uri) == spec
    odd = GemmSpec("fp16", out_dtype="fp32", residual_dtype="bf16", b_layout="kn", pdl=False,
                   epilogue="row_scale+col_scale+bias+gelu_tanh+residual",
                   config=TileConfig((128, 64, 64), (2, 2, 1), "pingpong", epilogue_tile=(64, 32)))
    assert GemmSpec.from_uri(odd.uri) == odd


@pytest.mark.parametrize("uri, fragment", [
    ("gemm_nonsense", "not a GEMM kernel URI"),
    ("conv_sm90a_x", "no kernel family"),
    ("attention_sm90a_x", "not an attention kernel URI"),
])
def test_bad_uris_raise(uri, fragment):
    from fused_gemm.generator import spec_from_uri
    with pytest.raises(SpecError, match=fragment):
        spec_from_uri(uri)


# -- the gated family ----------------------------------------------------------------------------
def test_gated_uri_round_trips_and_names_every_parameter():
    from fused_gemm.generator import GatedSpec, render, spec_from_uri
    from fused_gemm.generator.gated import gated_specs
    for spec in gated_specs("fp16", "gelu_tanh", bias=True, residual=True, out_dtype="fp32"):
        assert spec_from_uri(spec.uri) == spec
        assert "act-gelu_tanh" in spec.uri and "_bias-fp16" in spec.uri and "_c-fp32" in spec.uri
        src = render(spec)
        assert "fused_gemm::GatedPairOp<cutlass::epilogue::thread::GELU_taylor<float>" in src
        assert "Sm90PairCollectiveEpilogue<PairOp, " + ("true" if spec.config.swap_ab else "false") in src
    assert GatedSpec().uri == "gated_sm90a_a-bf16_d-bf16_t128x128x64_c1x2x1_pp_persist_act-silu"


def test_gated_spec_refuses_what_its_epilogue_cannot_do():
    from fused_gemm.generator import GatedSpec
    with pytest.raises(SpecError, match="multiple of 16"):
        GatedSpec(config=TileConfig((128, 72, 64), (1, 1, 1), "pingpong"))
    with pytest.raises(SpecError, match="stream-K"):
        GatedSpec(config=TileConfig((128, 128, 64), (1, 1, 1), "cooperative", "stream_k"))
    with pytest.raises(SpecError, match="activation"):
        GatedSpec(activation="tanh")
    with pytest.raises(SpecError, match="no mainloop"):
        GatedSpec("e4m3")
    vst = GatedSpec(bias=True, residual=True, out_dtype="fp32", vector_store=True,
                    config=TileConfig((128, 192, 64), (1, 2, 1), "pingpong"))
    assert "_vst_" in vst.uri and GatedSpec.from_uri(vst.uri) == vst
    for config in (TileConfig((128, 96, 64), (1, 1, 1), "pingpong"),
                   TileConfig((64, 64, 128), (1, 1, 1), "warpspecialized", swap_ab=True)):
        with pytest.raises(SpecError, match="vector_store"):
            GatedSpec(config=config, vector_store=True)
    with pytest.raises(SpecError, match="batches"):   # would meet a static_assert in nvcc
        GatedSpec(config=TileConfig((128, 208, 64), (1, 1, 1), "pingpong"))
    from fused_gemm.generator import RopeSpec
    with pytest.raises(SpecError, match="batches"):
        RopeSpec(config=TileConfig((64, 24, 128), (1, 1, 1), "warpspecialized", swap_ab=True))


def test_gated_gpu_rows_replace_a_row_of_the_table():
    """A GPU's gated row names the max_m of a table row (else it would silently serve nothing) and a
    config the gated epilogue runs; rule_for hands it out for that row only."""
    from fused_gemm.generator import GatedSpec
    from fused_gemm.generator.gated import heuristics
    from fused_gemm.generator.gated.presets import gated_specs
    rules = heuristics.RULES["sm90a"]
    for gpu, rows in heuristics.GPU_ROWS.items():
        for rule in rows:
            (row,) = [i for i, r in enumerate(rules) if r.max_m == rule.max_m]
            assert heuristics.rule_for("sm90a", gpu, row) == rule
            assert GatedSpec(config=rule.config, vector_store=heuristics.vector_store(rule.config)) in gated_specs()
            assert heuristics.rule_for("sm90a", "other-gpu", row) == rules[row]


def test_rope_l1_reserve_is_a_prefill_variant_chosen_by_m():
    from fused_gemm.generator import RopeSpec, render, spec_from_uri
    from fused_gemm.generator.rope import heuristics
    prefill = TileConfig((128, 128, 64), (1, 2, 1), "pingpong")
    decode = TileConfig((64, 16, 128), (1, 1, 1), "warpspecialized", swap_ab=True)
    kept = RopeSpec(config=prefill, l1_reserve_kb=64)
    assert kept.uri.endswith("_l1r64") and spec_from_uri(kept.uri) == kept
    assert "SharedStorage)) + 65536>" in render(kept) and "SharedStorage))>" in render(RopeSpec(config=prefill))
    for bad in ({"config": decode, "l1_reserve_kb": 64}, {"config": prefill, "l1_reserve_kb": 48}):
        with pytest.raises(SpecError, match="l1_reserve_kb"):
            RopeSpec(**bad)
    assert heuristics.l1_reserve_kb(4096, prefill) == 0
    assert heuristics.l1_reserve_kb(8192, prefill) == heuristics.l1_reserve_kb(16384, prefill) == 64
    assert heuristics.l1_reserve_kb(16384, decode) == 0
    assert heuristics.l1_reserve_kb(16384, prefill, "h200") == 0 and heuristics.l1_reserve_kb(16384, prefill, "h100") == 64


def test_gpu_rope_specs_hold_every_choice_of_qkv_rope():
    """What warmup builds ahead of a graph capture covers every M (the choice itself needs no GPU)."""
    from fused_gemm.generator.gemm import tuned
    from fused_gemm.generator.rope import RopeSpec, gpu_rope_specs
    from fused_gemm.generator.rope.heuristics import choose
    shapes = (("h100", (6144, 4096)), ("h200", (6144, 4096)), ("h100", (28672, 4096)), ("h200", (1, 1)),
              ("h100", (1280, 8192)), ("h200", (4608, 3584)))
    for gpu, (n, k) in shapes:
        for style, rotary in (("neox", 0), ("gptj", 0), ("neox", 64)):   # the tuned geometry and two others
            base = RopeSpec(style=style, rotary_dim=rotary)
            listed = set(gpu_rope_specs(gpu, n, k, rotary_dim=rotary, style=style))
            for m in list(range(1, 300)) + [511, 512, 513, 1024, 1025, 4096, 4097, 6000, 8191, 8192, 8193, 16384,
                                             40000]:
                spec, _ = choose(base, tuned.rule_for(gpu, "bf16", n, k, m), m, gpu, n, k,
                                 tuned.rule_for(gpu, "bf16", n, k, m, "qkv_rope"))   # as fused_gemm.qkv_rope does
                assert spec in listed, (gpu, n, k, style, rotary, m, spec.uri)


def test_rope_tuned_entries_serve_only_their_geometry():
    """A qkv_rope entry of the tuned table wins for NeoX over whole 128-wide heads; any other style,
    partial rotary or head dim falls through to the measured rows and the GEMM's tile."""
    from fused_gemm.generator.gemm import tuned
    from fused_gemm.generator.rope import RopeSpec
    from fused_gemm.generator.rope.heuristics import choose
    rule = tuned.rule_for("h100", "bf16", 6144, 4096, 512, "qkv_rope")
    assert rule is not None
    gemm = tuned.rule_for("h100", "bf16", 6144, 4096, 512)
    spec, launch = choose(RopeSpec(), gemm, 512, "h100", 6144, 4096, rule)
    assert (spec.config, launch) == (rule.config, rule.launch)
    for other in (RopeSpec(style="gptj"), RopeSpec(rotary_dim=64), RopeSpec(head_dim=64)):
        assert choose(other, gemm, 512, "h100", 6144, 4096, rule) == choose(other, gemm, 512, "h100", 6144, 4096)


def test_rope_measured_rows_win_their_buckets_and_ship_in_the_presets():
    """Measured rows (data) name configs the rope epilogue runs, at buckets M can land in; choose()
    takes them for their GPU and shape when no tuned qkv_rope entry serves the call (other geometries,
    other shapes); rope_specs (the presets) hold their kernels."""
    from fused_gemm.generator.gemm import tuned
    from fused_gemm.generator.rope import RopeSpec
    from fused_gemm.generator.rope.heuristics import ROWS, SHAPE_ROWS, choose
    from fused_gemm.generator.rope.presets import rope_specs
    base, preset = RopeSpec(), set(rope_specs())
    cases = [(None, -1, -1, ROWS)] + [(gpu, n, k, rows) for gpu, shapes in SHAPE_ROWS.items()
                                      for (n, k), rows in shapes.items()]
    for gpu, n, k, rows in cases:
        for bucket, row in rows.items():
            assert bucket in tuned.M_BUCKETS, (gpu, bucket)
            spec, launch = choose(base, tuned.rule_for(gpu or "", "bf16", n, k, bucket), bucket, gpu, n, k)
            assert (spec, launch) == row.apply(base) and spec in preset, (gpu, n, k, bucket)


def test_rope_choice_is_constant_within_a_memo_key():
    """qkv_rope memoises its choice per (M bucket, l1_row(M)): M inside one key must choose alike."""
    from fused_gemm.generator.gemm import tuned
    from fused_gemm.generator.rope import RopeSpec
    from fused_gemm.generator.rope.heuristics import choose, l1_row
    for gpu, (n, k) in (("h100", (6144, 4096)), ("h200", (6144, 4096)), ("h200", (1280, 8192)), (None, (1, 1))):
        seen = {}
        for m in list(range(1, 600)) + list(range(600, 40000, 97)):
            key = (tuned.bucket_of(m), l1_row(m))
            got = choose(RopeSpec(), tuned.rule_for(gpu or "", "bf16", n, k, m), m, gpu, n, k)
            assert seen.setdefault(key, got) == got, (gpu, n, k, m)


# -- the attention family ------------------------------------------------------------------------
def test_attention_uri_round_trips_and_refuses_bad_specs():
    from fused_gemm.generator import AttentionSpec, render, spec_from_uri
    from fused_gemm.generator.attention import attention_specs
    extra = [AttentionSpec("bf16", 256, True, 64),
             AttentionSpec("bf16", 128, True, 128, persistent=True, pingpong=True),
             AttentionSpec("bf16", 64, False, 128, persistent=True, overlap=True),
             AttentionSpec("bf16", 64, True, 128, persistent=True, overlap=True, ordered_epilogue=False),
             AttentionSpec("bf16", 64, False, 128, persistent=True, overlap=True, ordered_epilogue=False, chain=True),
             AttentionSpec("bf16", 64, True, 128, block_m=64, overlap=True, ordered_epilogue=False),
             AttentionSpec("bf16", 128, False, 128, block_m=64),
             AttentionSpec("bf16", 128, True, 128, persistent=True, overlap=True, chain=True)]
    for spec in attention_specs("fp16", 64) + extra:
        assert spec_from_uri(spec.uri) == spec
        source = render(spec)
        assert spec.uri in source and "fused_gemm/attention/sm90_fmha.hpp" in source
        assert f"_{spec.head_dim}>;" in source
        assert ("kIsMainloopLocked, true_type" in source) == spec.pingpong
        assert ("FaCausalPersistentScheduler;" in source) == (spec.persistent and spec.causal)
        assert ("Mask, true" in source) == spec.overlap
        assert ("/*kOrderedEpilogue=*/true" in source) == spec.ordered_epilogue
        assert ("kStagesQ" in source) == spec.chain
        assert ("/*kCtasPerSm=*/2>;" in source) == (spec.block_m == 64)
        assert ("kStagesKV, _3>" in source) == (spec.block_m == 64 and spec.head_dim == 128)
        assert ("kStagesKV, _4>" in source) == (spec.chain and spec.head_dim == 128)
    assert extra[2].uri == "attention_sm90a_bf16_d64_bn128_persist_ovl"
    assert extra[1].uri == "attention_sm90a_bf16_d128_causal_bn128_persist_pingpong"
    assert extra[3].uri == "attention_sm90a_bf16_d64_causal_bn128_persist_ovl_freeepi"
    assert extra[4].uri == "attention_sm90a_bf16_d64_bn128_persist_ovl_chain_freeepi"
    assert AttentionSpec("bf16", 128, causal=True).uri == "attention_sm90a_bf16_d128_causal_bn128"
    # Two CTAs an SM: the K/V ring shrinks to fit half the SM's shared memory (D = 128: three stages, none
    # to spare beside a persistent kernel's own O tile).
    assert extra[5].uri == "attention_sm90a_bf16_d64_causal_bm64_bn128_ovl_freeepi"
    assert (extra[5].ctas_per_sm, extra[5].kv_stages, extra[6].kv_stages) == (2, 5, 3)
    assert extra[6].smem_bytes <= (113 << 10) - (1 << 9)
    assert AttentionSpec("bf16", 128, False, 128, persistent=True).kv_stages == 5
    # Chained tiles at D = 128: a second Q stage a warpgroup leaves room for four K/V stages.
    assert (extra[7].uri, extra[7].kv_stages) == ("attention_sm90a_bf16_d128_causal_bn128_persist_ovl_chain", 4)
    assert extra[7].smem_bytes <= (227 << 10) - (1 << 10) and extra[4].kv_stages == 5
    for kwargs, fragment in (({"head_dim": 96}, "head_dim"), ({"block_n": 32}, "block_n"),
                             ({"head_dim": 256, "block_n": 128}, "shared memory"), ({"dtype": "fp32"}, "dtype"),
                             ({"arch": "sm80", "pingpong": True}, "ping-pong"),
                             ({"head_dim": 256, "block_n": 64, "persistent": True}, "shared memory"),
                             ({"pingpong": True, "overlap": True}, "pick one"),
                             ({"arch": "sm80", "overlap": True}, "overlapped"),
                             ({"arch": "sm80", "ordered_epilogue": False}, "epilogue order"),
                             ({"persistent": True, "chain": True}, "chain"),
                             ({"head_dim": 256, "block_n": 64, "persistent": True, "overlap": True, "chain": True},
                              "needs 3"),
                             ({"block_m": 64, "pingpong": True}, "one consumer warpgroup"),
                             ({"block_m": 64, "persistent": True}, "needs 3"),
                             ({"block_m": 64, "head_dim": 64, "persistent": True, "overlap": True, "chain": True}, "chain")):
        with pytest.raises(SpecError, match=fragment):
            AttentionSpec(**kwargs)


def test_attention_table_rows_cover_every_length_with_tested_kernels():
    """Each (arch, head dim, mask) has rows of strictly growing max Sq ending at ANY, every row makes a valid
    spec in both dtypes, and every pick is among the kernels the GPU tests build."""
    from fused_gemm.generator.attention.heuristics import ANY, TABLE, pick
    from fused_gemm.generator.attention.presets import PRESETS
    tested = set(PRESETS["attention-tests"]()) | set(PRESETS["attention-sm80-tests"]())
    for (arch, d, causal), table_rows in TABLE.items():
        bounds = [row[0] for row in table_rows]
        assert bounds == sorted(set(bounds)) and bounds[-1] == ANY, (arch, d, causal)
        for dtype in ("bf16", "fp16"):
            for sq in sorted({1} | {b + e for b in bounds[:-1] for e in (0, 1)} | {16384}):
                spec = pick(dtype, d, causal, sq, arch)
                assert spec.causal == causal and spec.head_dim == d and spec.arch == arch
                assert (spec in tested) == (dtype == "bf16" or d != 256), (spec.uri, sq)


def test_attention_sm80_specs_render_example_41_and_leave_sm90_alone():
    from fused_gemm.generator import AttentionSpec, locate, render, spec_from_uri
    from fused_gemm.generator.attention import attention_specs
    from fused_gemm.generator.attention.heuristics import pick
    from fused_gemm.generator.toolchain import ARCH_FLAGS
    specs = [s for d in (64, 128, 256) for s in attention_specs("fp16", d, "sm80")]
    for spec in specs:
        assert spec_from_uri(spec.uri) == spec and spec.csrc_includes == ("attention_sm80",)
        source = render(spec)
        assert spec.uri in source and "fused_gemm/attention_sm80/sm80_fmha.hpp" in source
        assert f"Sm80Attention<cutlass::half_t, {spec.block_m}, {spec.block_n}, {spec.head_dim}>" in source
        assert "sm90_fmha" not in source and "cute::" not in source
    assert AttentionSpec("bf16", 128, True, arch="sm80").uri == "attention_sm80_bf16_d128_causal_bm64_bn128"
    d256 = pick("bf16", 256, False, arch="sm80")
    assert (d256.block_m, d256.block_n, d256.o_workspace) == (32, 128, True)
    assert not pick("bf16", 128, True, arch="sm80").o_workspace
    assert "sm_90" in ARCH_FLAGS["sm80"][0] and "compute_80" in ARCH_FLAGS["sm80"][0]   # runs on Hopper
    sm90 = AttentionSpec("bf16", 128, causal=True)
    assert sm90.block_m == 128 and sm90.csrc_includes == () and sm90.include_folders == ()
    assert "sm80" not in render(sm90) and "attention_sm80" not in str(locate(sm90).folder)
    for kwargs, fragment in (({"persistent": True}, "persistent"), ({"block_m": 128}, "block_m"),
                             ({"block_n": 256}, "block_n")):
        with pytest.raises(SpecError, match=fragment):
            AttentionSpec(arch="sm80", **kwargs)
    with pytest.raises(SpecError, match=r"block_m 32 is not one of \(64, 128, 192\)"):
        AttentionSpec(block_m=32)
    with pytest.raises(SpecError, match="block_m 192 needs head_dim 64"):
        AttentionSpec(head_dim=128, block_m=192)
    wide = AttentionSpec(head_dim=64, block_m=192)
    assert wide.uri == "attention_sm90a_bf16_d64_bm192_bn128" and spec_from_uri(wide.uri) == wide
    assert "Shape<_192, _128, _64>" in render(wide) and "kNumMmaWarpGroups, _3>" in render(wide)
    assert "kNumMmaWarpGroups, _2>" in render(AttentionSpec(head_dim=64))
    with pytest.raises(SpecError, match="not supported by the attention family"):
        AttentionSpec(arch="sm100a")


@pytest.mark.parametrize("text", ["default", "swizzle=2,pdl=True", "splits=3,raster=along_m,decomposition=split_k"])
def test_launch_labels_round_trip(text):
    from fused_gemm.generator import LaunchOptions
    assert LaunchOptions.from_label(text).label == text


@pytest.mark.parametrize("text, fragment", [("swizle=2", "swizle"), ("swizzle=3", "swizzle"),
                                            ("raster=diagonal", "raster"), ("splits=x", "splits='x'"),
                                            ("pdl=yes", "pdl='yes'")])
def test_bad_launch_labels_name_the_option(text, fragment):
    from fused_gemm.generator import LaunchOptions
    with pytest.raises(ValueError, match=fragment):
        LaunchOptions.from_label(text)
