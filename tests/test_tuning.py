"""The tuned tables, the tuning space, the sweep's plan and the sweep/tune CLI (no GPU needed)."""
import csv
import json

import pytest

from fused_gemm.generator import LaunchOptions, SpecError, TileConfig
from fused_gemm.generator.gemm import heuristics, tuned, tuning_space
from fused_gemm.generator.gemm.presets import PRESETS
from fused_gemm.generator.gemm.spec import config_from_name


def test_tile_config_names_read_back():
    for c in tuning_space.SM90_BF16:
        assert config_from_name(c.config.name) == c.config
    assert TileConfig.from_name("t128x128x64_c1x2x1_pp_persist_e64x32").epilogue_tile == (64, 32)
    for bad in ("t128x128x64", "t128x128x64_c1x2x1_pp_persist_swapab_extra", "t128x128x64_c1x2x1_coop_persist_x"):
        with pytest.raises(SpecError):
            TileConfig.from_name(bad)


def test_every_m_bucket_has_candidates():
    for m in tuned.M_BUCKETS:
        assert tuning_space.candidates("sm90a", "bf16", m), m


def _table(*more):
    small = TileConfig((64, 16, 128), (1, 1, 1), "warpspecialized", "persistent", swap_ab=True)
    return tuned.TunedTable("h100", {"epilogue": "bias+gelu_tanh"}, (
        tuned.Entry("bf16", 4096, 4096, 16, small, LaunchOptions(pdl=True), 1.1),
        tuned.Entry("bf16", 4096, 4096, 1, small, LaunchOptions(pdl=True), 1.2),
        tuned.Entry("bf16", 4096, 4096, 4096, TileConfig(), LaunchOptions(swizzle=4, raster="along_m"), 1.0)) + more)


def test_table_json_round_trip_and_buckets(tmp_path, monkeypatch):
    gated = TileConfig((128, 128, 64), (2, 1, 1), "cooperative", "persistent")
    table = _table(tuned.Entry("bf16", 4096, 4096, 1, gated, LaunchOptions(), 1.0, op="gated"),
                   tuned.Entry("fp16", 4096, 4096, 4096, gated, LaunchOptions(), 1.0))
    assert set(tuned.TunedTable.from_json(table.to_json()).entries) == set(table.entries)
    monkeypatch.setattr(tuned, "TABLE_DIR", tmp_path)
    (tmp_path / "h100.json").write_text(table.to_json())
    tuned.load.cache_clear()
    try:
        for m, want in ((1, 1), (2, 16), (16, 16), (17, None), (4096, 4096), (3000, 4096), (10 ** 6, None)):
            rule = tuned.rule_for("h100", "bf16", 4096, 4096, m)
            if want is None:      # a bucket the table lacks: the heuristic decides
                assert rule is None, m
                continue
            entry = next(e for e in table.entries if e.m == want)
            assert (rule.config, rule.launch) == (entry.config, entry.launch), m
        assert tuned.rule_for("h100", "bf16", 4096, 8192, 1) is None      # shape not tuned: heuristic
        # linear's own calls (shared=True) in fp16 take bf16's entry where fp16 has none, fp16's own where it has
        # one; other ops, and the families reading the GEMM's entries (shared=False), keep their own dtype's
        bf16_m1 = tuned.rule_for("h100", "bf16", 4096, 4096, 1)
        assert tuned.rule_for("h100", "fp16", 4096, 4096, 1, shared=True) == bf16_m1
        assert tuned.rule_for("h100", "fp16", 4096, 4096, 1) is None
        assert tuned.rule_for("h100", "fp16", 4096, 4096, 4096, shared=True).config == gated
        assert tuned.rule_for("h100", "bf16", 4096, 4096, 1, op="gated").config == gated
        assert tuned.rule_for("h100", "fp16", 4096, 4096, 1, op="gated", shared=True) is None
        assert tuned.rule_for("h999", "bf16", 4096, 4096, 1) is None      # no table for this GPU
    finally:
        tuned.load.cache_clear()


def test_gpu_keys():
    assert tuned.gpu_key("NVIDIA H100 80GB HBM3") == "h100"
    assert tuned.gpu_key("NVIDIA H200") == "h200"
    assert tuned.gpu_key("NVIDIA H100 NVL") == "h100-nvl"
    assert tuned.gpu_key("NVIDIA H100 PCIe") == "h100-pcie"


@pytest.mark.parametrize("gpu", sorted(p.stem for p in tuned.TABLE_DIR.glob("*.json")))
def test_shipped_tables_are_valid(gpu):
    """Every shipped entry names a candidate the tuner can build for its op; linear's shapes have every
    bucket, the other ops' every bucket they have candidates for."""
    from fused_gemm.bench.tune import WORKLOADS, TORCH_DTYPES
    table = tuned.load(gpu)
    shapes = {}
    for e in table.entries:
        work = WORKLOADS[e.op]
        known = {(c.config, c.promotion) for c in work.candidates(e.m, TORCH_DTYPES[e.dtype])}
        assert (e.config, e.promotion) in known, e
        shapes.setdefault((e.op, e.dtype, e.n, e.k), set()).add(e.m)
    for (op, dtype, n, k), ms in shapes.items():
        want = {m for m in tuned.M_BUCKETS if WORKLOADS[op].candidates(m, TORCH_DTYPES[dtype])}
        assert ms == want, (op, dtype, n, k)
    specs = PRESETS[f"tuned-{gpu}"]()
    families = {"linear": "gemm", "fp8": "gemm", "fp8_fast": "gemm", "gated": "gated", "qkv_rope": "rope"}
    assert {s.family for s in specs} == {families[e.op] for e in table.entries}
    assert len(specs) >= len({(e.op, e.config, e.promotion) for e in table.entries})


def test_tables_hold_each_ops_entries(tmp_path, monkeypatch):
    """An op's entries (gated, fp8 with its promotion) live beside linear's, are found by op only, and a
    later run of one op replaces its own entries and keeps the rest (and linear's meta)."""
    from fused_gemm.bench.tune import merge
    fp8_cfg = TileConfig((128, 128, 128), (1, 2, 1), "cooperative")
    fp8 = tuned.Entry("e4m3", 4096, 4096, 4096, fp8_cfg, LaunchOptions(swizzle=8), 0.97, "fp8", 16)
    fast_cfg = TileConfig((128, 128, 128), (2, 1, 1), "pingpong")
    fast = tuned.Entry("e4m3", 4096, 4096, 4096, fast_cfg, LaunchOptions(swizzle=4), 0.99, "fp8_fast")
    gated = tuned.Entry("bf16", 28672, 4096, 4096, TileConfig(), LaunchOptions(swizzle=4), 0.99, "gated")
    table = tuned.TunedTable("h100", {"epilogue": "bias+gelu_tanh"}, _table().entries + (fp8, fast, gated))
    back = tuned.TunedTable.from_json(table.to_json())
    assert set(back.entries) == set(table.entries)
    assert '"op": "fp8", "promotion": 16' in table.to_json() and '"op": "linear"' not in table.to_json()
    monkeypatch.setattr(tuned, "TABLE_DIR", tmp_path)
    (tmp_path / "h100.json").write_text(table.to_json())
    tuned.load.cache_clear()
    try:
        rule = tuned.rule_for("h100", "e4m3", 4096, 4096, 3000, "fp8")
        assert (rule.config, rule.launch, rule.promotion) == (fp8_cfg, LaunchOptions(swizzle=8), 16)
        rule = tuned.rule_for("h100", "e4m3", 4096, 4096, 3000, tuned.FP8_OP[True])   # fast accumulation's own
        assert (rule.config, rule.launch, rule.promotion) == (fast_cfg, LaunchOptions(swizzle=4), 4)
        assert tuned.rule_for("h100", "e4m3", 4096, 4096, 3000) is None            # linear has no e4m3 entry
        assert tuned.rule_for("h100", "bf16", 28672, 4096, 4096, "gated").launch == LaunchOptions(swizzle=4)
        assert tuned.rule_for("h100", "bf16", 28672, 4096, 4096) is None           # nor this shape
        assert tuned.rule_for("h100", "bf16", 4096, 4096, 4096, "gated") is None   # a linear shape only
    finally:
        tuned.load.cache_clear()
    with pytest.raises(ValueError, match="op"):
        tuned.Entry("bf16", 1, 1, 1, TileConfig(), LaunchOptions(), op="gemv")
    with pytest.raises(ValueError, match="promotion"):     # fast accumulation never promotes
        tuned.Entry("e4m3", 1, 1, 1, fast_cfg, LaunchOptions(), op="fp8_fast", promotion=8)
    bad = json.loads(table.to_json())               # such an entry in a file: left out, the rest still read
    bad["entries"].append({**fast.to_json(), "m": 16384, "promotion": 8})
    with pytest.warns(UserWarning, match="left out"):
        assert set(tuned.TunedTable.from_json(json.dumps(bad)).entries) == set(table.entries)
    future = json.loads(table.to_json())            # a newer tuner's op: left out, the rest still read
    future["entries"].append({**future["entries"][0], "op": "int4"})
    assert set(tuned.TunedTable.from_json(json.dumps(future)).entries) == set(table.entries)
    newer = tuned.TunedTable("h100", {"op": "fp8", "measured": "later"}, (
        tuned.Entry("e4m3", 4096, 4096, 4096, fp8_cfg, LaunchOptions(), 1.0, "fp8", 8),))
    merged = merge(table, newer)
    assert len(merged.entries) == len(table.entries)
    assert tuned.TunedTable.from_json(merged.to_json()).rule_at("e4m3", 4096, 4096, 4096, "fp8").promotion == 8
    assert merged.meta["epilogue"] == "bias+gelu_tanh" and merged.meta["fp8"]["measured"] == "later"
    assert merged.rule_at("e4m3", 4096, 4096, 4096, "fp8_fast").config == fast_cfg      # the other op's, kept
    faster = tuned.TunedTable("h100", {"op": "fp8_fast", "measured": "later"}, (
        tuned.Entry("e4m3", 4096, 4096, 4096, fp8_cfg, LaunchOptions(), 1.0, "fp8_fast"),))
    merged = tuned.TunedTable.from_json(merge(merged, faster).to_json())
    assert merged.rule_at("e4m3", 4096, 4096, 4096, "fp8_fast").config == fp8_cfg
    assert merged.rule_at("e4m3", 4096, 4096, 4096, "fp8").promotion == 8
    assert [line.split(": ", 1)[1] for line in merged.meta["history"]] == [
        f"{op}, 1 cells (N x K 4096x4096; M 4096), minimal False" for op in ("fp8", "fp8_fast")]


def test_a_merged_table_is_minimal_only_while_every_linear_run_was():
    """A linear run merged into a table keeps the earlier runs' history and clears "minimal" unless both were."""
    from fused_gemm.bench.tune import merge
    entry = _table().entries[0]
    first = merge(None, tuned.TunedTable("h100", {"op": "linear", "measured": "day 1", "minimal": True}, (entry,)))
    again = merge(first, tuned.TunedTable("h100", {"op": "linear", "measured": "day 2", "minimal": True}, (entry,)))
    assert again.meta["minimal"] is True
    later = merge(again, tuned.TunedTable("h100", {"op": "linear", "measured": "day 3", "minimal": False}, (entry,)))
    assert later.meta["minimal"] is False and later.meta["measured"] == "day 3"
    assert [line.split(":")[0] for line in later.meta["history"]] == ["day 1", "day 2", "day 3"]
    assert f"N x K {entry.n}x{entry.k}; M {entry.m}), minimal False" in later.meta["history"][-1]
    assert merge(later, first).meta["minimal"] is False      # once mixed, a minimal run does not make it minimal
    assert "op" not in first.meta and first.meta["history"] == [first.meta["history"][0]]
    unknown = tuned.TunedTable("h100", {"epilogue": "bias+gelu_tanh"}, (entry,))   # linear entries, no word on minimal
    assert merge(unknown, first).meta["minimal"] is False
    fp8_first = merge(None, tuned.TunedTable("h100", {"op": "fp8", "measured": "day 0", "minimal": False}, ()))
    assert "fp8" in fp8_first.meta and "op" not in fp8_first.meta and fp8_first.meta["history"] == ["day 0: fp8, no cells, minimal False"]
    assert merge(fp8_first, tuned.TunedTable("h100", {"op": "linear", "minimal": True}, (entry,))).meta["minimal"] is True


def test_a_retuned_cell_is_kept_only_where_every_sweep_run_confirms_it():
    """confirmed_entries: a changed entry replaces the current one only where every run after beats every run
    before by more than the margin, in cells swept in all runs; unchanged entries and other ops / dtypes stay out."""
    from fused_gemm.bench.tune import confirmed_entries
    current = _table()
    wide = TileConfig((128, 160, 64), (1, 1, 1), "pingpong")
    moved = tuned.Entry("bf16", 4096, 4096, 4096, wide, LaunchOptions(pdl=True), 1.05)       # changed, confirmed
    noisy = tuned.Entry("bf16", 4096, 4096, 16, wide, LaunchOptions(), 1.05)                  # changed, not confirmed
    same = current.entries[1]                                                                 # M = 1, unchanged
    unswept = tuned.Entry("bf16", 1280, 8192, 512, wide, LaunchOptions(), 1.0)                # new cell, not swept
    fp16 = tuned.Entry("fp16", 4096, 4096, 4096, wide, LaunchOptions(), 1.1)                  # another dtype
    retuned = tuned.TunedTable("h100", {}, (moved, noisy, same, unswept, fp16))
    before = [{(4096, 4096, 4096): 1.00, (4096, 4096, 16): 1.00, (4096, 4096, 1): 1.0},
              {(4096, 4096, 4096): 0.99, (4096, 4096, 16): 1.02, (4096, 4096, 1): 1.0}]
    after = [{(4096, 4096, 4096): 1.03, (4096, 4096, 16): 1.05, (4096, 4096, 1): 1.2},
             {(4096, 4096, 4096): 1.02, (4096, 4096, 16): 1.025, (4096, 4096, 1): 1.2}]
    assert confirmed_entries(current, retuned, before, after) == (moved,)
    assert confirmed_entries(current, retuned, before, after, margin=0.02) == ()      # 1.02 is not > 1.02 x 1.00
    assert confirmed_entries(current, retuned, before, after, margin=0.0) == (moved, noisy)
    assert confirmed_entries(current, retuned, [], after) == ()
    assert confirmed_entries(current, retuned, before, after, dtype="fp16") == (fp16,)  # ratios: a sweep in that dtype


def test_tuner_workloads_build_their_ops_specs():
    """Each op's candidates make specs of the op's own family, as its select() builds them."""
    import torch
    from fused_gemm.bench.cli import tune_shapes
    from fused_gemm.bench.tune import WORKLOADS
    gated, fp8 = WORKLOADS["gated"], WORKLOADS["fp8"]
    for m in tuned.M_BUCKETS:
        for c in gated.candidates(m):
            assert gated.spec(c, torch.bfloat16).family == "gated"
    assert not fp8.candidates(512) and fp8.candidates(1024)
    from fused_gemm.generator.gated.presets import gpu_gated_specs
    from fused_gemm.generator.gemm.presets import gpu_fp8_specs
    for gpu in ("h100", "h200"):                     # warmup lists hold every tuned entry's kernel
        table = tuned.load(gpu)
        gated_listed = {s.config for s in gpu_gated_specs(gpu)}
        fp8_listed = {(s.config, s.promotion, s.fast_accum) for s in gpu_fp8_specs(gpu)}
        for e in table.entries:
            assert e.op != "gated" or e.config in gated_listed, e
            assert e.op not in tuned.FP8_OPS or (e.config, e.promotion, tuned.FP8_OPS[e.op]) in fp8_listed, e
    specs = fp8.candidate_specs(torch.float8_e4m3fn, [4096])
    assert {s.promotion for s in specs} == {4, 8, 16} and all(s.a_dtype == "e4m3" for s in specs)
    assert not any(s.fast_accum for s in specs)
    fast = WORKLOADS["fp8_fast"]
    assert not fast.candidates(512) and fast.candidates(1024)
    fast_specs = fast.candidate_specs(torch.float8_e4m3fn, [4096])
    assert fast_specs and all(s.fast_accum and s.a_dtype == "e4m3" for s in fast_specs)
    assert {s.config.schedule for s in fast_specs} == {"pingpong", "cooperative"}
    assert tune_shapes("gated", ["llama3-8b", "custom:256x128"]) == [(28672, 4096), (256, 128)]
    assert (6144, 4096) in tune_shapes("fp8", ["llama3-8b"])
    rope = WORKLOADS["qkv_rope"]
    assert tune_shapes("qkv_rope", ["llama3-8b", "mistral-7b", "llama3-70b-tp8"]) == [(6144, 4096), (1280, 8192)]
    with pytest.raises(ValueError, match="model presets"):
        tune_shapes("qkv_rope", ["square-8192"])
    from fused_gemm.bench.tune import rope_geometry
    assert rope_geometry(6144, 4096) == (32, 8, 128)
    for m in tuned.M_BUCKETS:
        assert rope.candidates(m), m
    specs = rope.candidate_specs(torch.bfloat16, tuned.M_BUCKETS)
    assert all(s.family == "rope" for s in specs) and {s.l1_reserve_kb for s in specs} == {0, 64}


def test_minimal_configs_cover_every_cell():
    from fused_gemm.bench.tune import Cell, minimal_configs
    L = LaunchOptions()
    cells = [Cell(1, 1, 1, {("a", L): 1.0, ("b", L): 1.01}), Cell(1, 1, 2, {("a", L): 1.10, ("c", L): 1.0}),
             Cell(1, 1, 3, {("c", L): 1.0, ("b", L): 1.015}), Cell(1, 1, 4, {("b", L): 1.0})]
    chosen = minimal_configs(cells, 0.02)
    assert set(chosen) == {"b", "c"}
    assert minimal_configs(cells, 0.0) == ["b", "c", "a"] or set(minimal_configs(cells, 0.0)) == {"a", "b", "c"}


def test_sweep_plan_times_each_shape_once():
    from fused_gemm.bench import models, sweep
    rows = sweep.plan(["linear"], ["llama3-8b", "mistral-7b"], [1, 16], {"linear": "bias"})
    assert len(rows) == 2 * len(models.layers("llama3-8b"))        # mistral-7b has llama3-8b's shapes
    assert {r[2] for r in rows} == {"llama3-8b"}
    assert models.layers("custom:1024x512,256x128") == [("1024x512", 1024, 512), ("256x128", 256, 128)]
    assert ("gate_up", 2 * 3584, 8192) in models.layers("llama3-70b-tp8")
    with pytest.raises(ValueError):
        models.layers("gpt-5")


def test_sweep_resume_keys_hold_the_heads(tmp_path):
    """A resumed sweep skips the rows its CSV holds, heads included: a qkv_rope row of llama3-8b's heads does
    not stand in for another model's QKV of the same shape; a GEMM row has no heads."""
    from fused_gemm.bench import sweep
    assert sweep.geometry_name("linear", "llama3-8b") == ""
    assert sweep.geometry_name("qkv_rope", "llama3-70b-tp8") == "h8_kv1_d128"
    path = tmp_path / "s.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=sweep.COLUMNS)
        writer.writeheader()
        writer.writerow({"op": "qkv_rope", "epilogue": "neox", "dtype": "bfloat16", "N": 6144, "K": 4096, "M": 16,
                         "geometry": "h32_kv8_d128"})
    assert sweep._done(path) == {("qkv_rope", "neox", "bfloat16", "6144", "4096", "16", "h32_kv8_d128")}


def test_sweep_plan_attention_ops_take_the_models_heads():
    from fused_gemm.bench import catalog, sweep
    ops = {"qkv_rope": "neox", "attention": "causal", "decode_attention": "b32"}
    rows = sweep.plan(list(ops), ["llama3-8b", "mistral-7b", "llama3-70b-tp8"], [1, 1024], ops)
    assert len(rows) == 3 * 2 * 2                                   # mistral-7b has llama3-8b's heads
    assert ("qkv_rope", "neox", "llama3-8b", "qkv", 6144, 4096, 1) in rows
    assert ("attention", "causal", "llama3-70b-tp8", "h8_kv1_d128", 1024, 128, 1024) in rows   # a KV head a GPU
    assert catalog.OPS["decode_attention"].geometry("qwen2.5-7b") == {"heads": 28, "kv_heads": 4, "head_dim": 128}
    with pytest.raises(ValueError, match="model presets"):
        sweep.plan(["attention"], ["square-4096"], [1], ops)


def test_model_layers_and_attention_agree_on_the_gpus_heads():
    from fused_gemm.bench.models import MODELS, Model
    assert [n for _, n, _ in MODELS["llama3-70b-tp8"].layers()[:2]] == [1280, 8192]
    # 8 KV heads over 16 GPUs: each holds one, replicated, and its QKV shard is as wide as that
    m = Model(8192, 64, 8, 128, 28672, tp=16)
    q, kv, d = m.attention()
    assert (q, kv, d) == (4, 1, 128)
    assert m.layers()[0] == ("qkv", (q + 2 * kv) * d, 8192) and m.layers()[1] == ("o", 8192, q * d)
    for model in MODELS.values():
        q, kv, d = model.attention()
        assert model.layers()[0][1] == (q + 2 * kv) * d


def test_cli_has_sweep_tune_and_plot(tmp_path):
    import subprocess
    import sys
    from fused_gemm.bench.models import SWEEP_OPS
    from fused_gemm.bench.catalog import OPS
    from fused_gemm.cli import main
    assert tuple(OPS) == SWEEP_OPS
    # the generator's commands share the parser: building it must not import torch
    code = ("import sys, fused_gemm.bench.cli, fused_gemm.cli; from fused_gemm.generator import cli; "
            "cli.parser(fused_gemm.bench.cli.add_commands); assert 'torch' not in sys.modules, 'torch imported'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for command in ("sweep", "tune", "plot"):
        with pytest.raises(SystemExit) as exc:
            main([command, "--help"])
        assert exc.value.code == 0


def test_summary_and_plots_from_a_sweep_csv(tmp_path):
    from fused_gemm.bench import sweep
    path = tmp_path / "s.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=sweep.COLUMNS)
        w.writeheader()
        for m, speed in ((1, 1.1), (4096, 0.9)):
            w.writerow({"op": "linear", "epilogue": "bias", "dtype": "bfloat16", "N": 64, "K": 64, "M": m,
                        "preset": "p", "layer": "l", "kernel": "k", "timing": "graph", "ours_us": 10,
                        "speedup_vs_mm": speed, "speedup_vs_eager": 1.2, "tflops": 100, "gbps": 1000,
                        "pct_of_ceiling": 50, "floor_ratio": 1.1 if m == 1 else "", "rel_err": 1e-3, "ok": True,
                        "cold_us": 9 if m > 64 else "", "cold_speedup": 0.97 if m > 64 else ""})
    (tmp_path / "s.json").write_text(json.dumps({"gpu": "G", "torch": "t", "ceilings": {"copy_GBps": 3000,
                                                                                      "mm_TFLOPs": 700}}))
    text = sweep.summary(path)
    assert "<mm bar" in text and "geometric mean" in text
    assert "cold x" in text and " 0.970" in text
    pytest.importorskip("matplotlib")
    from fused_gemm.bench.plots import plot
    assert all(p.is_file() and p.stat().st_size > 1000 for p in plot(path))


def test_heuristic_is_the_fallback_for_untuned_shapes():
    assert heuristics.pick("sm90a", 1).config.swap_ab


def test_a_weight_the_table_lacks_takes_its_nearest_tabled_weights_entry(tmp_path, monkeypatch):
    """Within 1.5x in rows, from the M = 64 bucket (M > 16) on, the nearest whose entry's tile divides the rows (its N
    side, or its M side under swap-AB); a split-K entry only for a K as long as NARROW_RULES' and with a split count that
    fits this K (else the automatic one); nothing for an empty weight."""
    t64 = TileConfig((64, 64, 128), (1, 1, 1), "warpspecialized", "persistent")
    t112 = TileConfig((128, 112, 64), (1, 1, 1), "cooperative", "persistent", epilogue_tile=(128, 16))
    split = TileConfig((128, 128, 64), (1, 1, 1), "pingpong", "split_k_parallel")
    small = TileConfig((64, 16, 128), (1, 1, 1), "warpspecialized", "persistent", swap_ab=True)
    swap = TileConfig((64, 64, 128), (1, 1, 1), "warpspecialized", "persistent", swap_ab=True)
    table = tuned.TunedTable("h100", {}, (
        tuned.Entry("bf16", 4096, 4096, 64, swap, LaunchOptions(pdl=True), 1.0),
        tuned.Entry("bf16", 4096, 4096, 128, t64, LaunchOptions(swizzle=4), 1.1),
        tuned.Entry("bf16", 4096, 4096, 16, small, LaunchOptions(pdl=True), 1.1),
        tuned.Entry("bf16", 14336, 4096, 128, t112, LaunchOptions(pdl=True), 1.0),
        tuned.Entry("bf16", 12800, 4096, 128, t64, LaunchOptions(), 1.0),
        tuned.Entry("bf16", 1280, 8192, 256, split, LaunchOptions(splits=8, pdl=True), 1.0)))
    monkeypatch.setattr(tuned, "TABLE_DIR", tmp_path)
    (tmp_path / "h100.json").write_text(table.to_json())
    tuned.load.cache_clear()
    try:
        near = tuned.nearest_rule_for
        assert near("h100", "bf16", 3072, 2048, 100).config == t64            # 1.33x fewer rows, another K
        assert near("h100", "fp16", 3072, 2048, 100).launch == LaunchOptions(swizzle=4)   # fp16 reads bf16's
        assert near("h100", "bf16", 3072, 2048, 16) is None                   # decode buckets keep their rules
        assert near("h100", "bf16", 3072, 2048, 17).config == swap            # the M = 64 bucket starts at 17
        assert near("h100", "bf16", 3040, 2048, 64) is None                   # 64 (swap-AB: the M side) ∤ 3040
        assert near("h100", "bf16", 3072, 0, 128) is None and near("h100", "bf16", 0, 2048, 128) is None
        assert near("h100", "bf16", 8192, 4096, 128) is None                  # 2x the rows: too far
        assert near("h100", "bf16", 14224, 4096, 128).config == t112          # 127 x 112 rows
        assert near("h100", "bf16", 13824, 4096, 128).config == t64           # 112 ∤ 13824: the next nearest's tile
        assert near("h100", "bf16", 16384, 4096, 128).config == t64           # ... and 16384
        assert near("h100", "bf16", 16400, 4096, 128) is None                 # neither divides 16400
        assert near("h100", "bf16", 1536, 8192, 256).launch.splits == 8
        assert near("h100", "bf16", 1536, 4104, 256).launch.splits == 1       # 4104 / 8 is no multiple of 8
        assert near("h100", "bf16", 1536, 2048, 256) is None                  # too short a K to split
    finally:
        tuned.load.cache_clear()


@pytest.mark.parametrize("m, n, k, kind", [
    (64, 2304, 16384, "split"), (64, 3584, 4096, "split"), (128, 2560, 8192, "split"), (256, 1536, 4096, "split"),
    (16, 1280, 8192, "rows"),      # decode sizes keep their row
    (64, 4096, 4096, "rows"),      # wide enough to fill the GPU
    (128, 3584, 8192, "rows"),
    (64, 1280, 2048, "rows"),      # K too short to split
    (512, 1280, 8192, "narrow"), (1024, 1536, 4096, "narrow"),      # persistent narrow rows at M = 257-1024
    (512, 2560, 8192, "rows"), (1024, 1536, 2048, "rows"), (2048, 1536, 4096, "rows"),
])
def test_narrow_weights_take_their_rows(m, n, k, kind):
    rule = heuristics.pick_for_shape("sm90a", m, n, k)
    assert (rule.config.scheduler == "split_k_parallel") == (kind == "split")
    assert (rule == heuristics.pick("sm90a", m)) == (kind == "rows")
    assert m <= rule.max_m


def test_linear_warmup_set_holds_the_narrow_rows():
    from fused_gemm.generator.gemm.presets import gpu_linear_specs
    configs = {s.config for s in gpu_linear_specs("no-such-gpu")}
    assert {row.config for row in heuristics.NARROW_RULES["sm90a"]} <= configs


def test_attention_sweep_cases_refuse_an_unknown_option_column():
    """The attention-shaped sweep ops read their option from the epilogue column: a wrong one is
    refused, naming what it takes, before any tensor is made."""
    pytest.importorskip("torch")
    from fused_gemm.bench import attention_ops, ops
    geometry = {"heads": 32, "kv_heads": 8, "head_dim": 128}
    with pytest.raises(ValueError, match="'causal' or 'none'"):
        attention_ops.attention_case(4096, 1024, 16, None, "bias", **geometry)
    with pytest.raises(ValueError, match="b<B>"):
        attention_ops.decode_attention_case(4096, 1024, 16, None, "32", **geometry)
    with pytest.raises(ValueError, match="neox"):
        ops.qkv_rope_case(6144, 4096, 16, None, "gptj", **geometry)
