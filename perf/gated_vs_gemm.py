"""What the gated epilogue costs: gated_linear against our plain GEMM of the same tile and launch
options on the same packed [2I, K] weight (no activation, twice the output bytes), and against the
gated kernel with 16-byte stores (GatedSpec.vector_store), with torch.mm on it and torch.compile of
the eager SwiGLU, on bench_gated's rotated inputs, in shuffled order, ratios
per repetition.  At large M an H100/H200 runs these power-bound: what a kernel spends besides its
MMA (the activation's instructions among it) comes off the clock of all of it.

    python perf/gated_vs_gemm.py [M] [--config t128x128x64_c1x2x1_pp_persist] [--swizzle 8 --raster along_m]
                                 [--sustained SECONDS]

--sustained then runs each variant alone for that long, reading the SM clock and board power from
nvidia-smi meanwhile: cycles per call tell a kernel that does more work from one that only runs at a
lower clock, and energy per call is what a power-bound GPU trades for speed.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

import fused_gemm
from fused_gemm.bench.timing import paired_ratios, time_samples, warm_gpu
from fused_gemm.generator import GatedSpec, GemmSpec, LaunchOptions, TileConfig

sys.path.insert(0, str(Path(__file__).parent))
from bench_gated import VARIANTS, make_sets  # noqa: E402


def sustained(calls, seconds: float, settle: float = 0.5) -> dict:
    """One variant alone for ``seconds`` after ``settle`` seconds of ramp: time per call, and the mean
    of nvidia-smi's SM clock (MHz) and power (W) sampled every 50 ms over the timed part."""
    import subprocess
    import time
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    try:   # nvidia-smi's --id is not the CUDA ordinal (CUDA_VISIBLE_DEVICES, ordering): name the PCI bus
        gpu = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    except AttributeError:
        gpu = str(torch.cuda.current_device())
    query = ["nvidia-smi", f"--id={gpu}", "--query-gpu=clocks.sm,power.draw.instant",
             "--format=csv,noheader,nounits", "-lms", "50"]
    n = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < settle:
        calls[n % len(calls)]()
        n += 1
    torch.cuda.synchronize()
    smi = subprocess.Popen(query, stdout=subprocess.PIPE, text=True)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    n, t0 = 0, time.monotonic()
    previous = None
    while time.monotonic() - t0 < seconds:
        for _ in range(4):
            calls[n % len(calls)]()
            n += 1
        batch = torch.cuda.Event()
        batch.record()
        if previous is not None:   # one batch always queued behind the running one: the GPU never waits
            previous.synchronize()
        previous = batch
    end.record()
    end.synchronize()
    smi.terminate()
    readings = []
    for line in smi.communicate()[0].splitlines()[2:]:
        try:
            readings.append([float(v) for v in line.split(",")])
        except ValueError:   # "[N/A]" or a partial line
            pass
    clock = statistics.mean(r[0] for r in readings) if readings else float("nan")
    power = statistics.mean(r[1] for r in readings) if readings else float("nan")
    per_call = start.elapsed_time(end) / 1e3 / n
    return {"us": per_call * 1e6, "mhz": clock, "watts": power, "mcycles": per_call * clock, "mj": per_call * power * 1e3}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("m", type=int, nargs="?", default=16384)
    ap.add_argument("--config", default="t128x128x64_c1x2x1_pp_persist")
    ap.add_argument("--swizzle", type=int, default=8)
    ap.add_argument("--raster", default="along_m")
    ap.add_argument("--sustained", type=float, default=0.0, metavar="SECONDS")
    args = ap.parse_args(argv)
    config, launch = TileConfig.from_name(args.config), LaunchOptions(swizzle=args.swizzle, raster=args.raster)
    gemm = fused_gemm.compile(GemmSpec("bf16", epilogue="none", config=config))
    gated = fused_gemm.compile(GatedSpec("bf16", activation="silu", config=config))
    vector = fused_gemm.compile(GatedSpec("bf16", activation="silu", config=config, vector_store=True))
    warm_gpu()
    sets = make_sets(args.m)
    variants = {"gated_linear (as shipped)": [VARIANTS["ours"](s) for s in sets],
                f"gated {config.name}": [lambda s=s: gated(s["x"], s["packed"], launch=launch) for s in sets],
                f"gated vst {config.name}": [lambda s=s: vector(s["x"], s["packed"], launch=launch)
                                                        for s in sets],
                f"gemm {config.name}": [lambda s=s: gemm(s["x"], s["packed"], launch=launch) for s in sets],
                "torch.mm [2I,K]": [VARIANTS["mm_cat"](s) for s in sets],
                "torch.compile SwiGLU": [VARIANTS["compiled"](s) for s in sets]}
    with torch.no_grad():
        samples = time_samples(variants, min_calls=10 if args.m >= 4096 else 64, reps=15)
    over = paired_ratios(samples, "gated_linear (as shipped)")
    print(f"{torch.cuda.get_device_name()}, M={args.m}, K=4096, I=14336, bf16; launch swizzle={args.swizzle} "
          f"raster={args.raster}")
    for name in samples:
        print(f"  {name:<46}{statistics.median(samples[name]) * 1e6:>9.1f}us  time / gated_linear {over[name]:.3f}")
    if args.sustained:
        print(f"each alone for {args.sustained:g} s (after 0.5 s of ramp), nvidia-smi every 50 ms:")
        with torch.no_grad():
            for name, calls in variants.items():
                r = sustained(calls, args.sustained)
                print(f"  {name:<46}{r['us']:>9.1f}us {r['mhz']:>6.0f} MHz {r['watts']:>5.0f} W "
                      f"{r['mcycles']:>8.2f} Mcycles/call {r['mj']:>6.2f} mJ/call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
