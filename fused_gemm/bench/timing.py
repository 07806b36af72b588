"""GPU timing helpers: CUDA events, warm-up first, medians, inputs rotated past the L2.

Variants are timed interleaved, in a shuffled order per repetition (a, b, c, c, a, b, b, c, a, ...),
so that clock or thermal drift during a run, and the kernel that ran just before, land on all of
them alike; paired_ratios takes ratios per repetition before the median.
"""
from __future__ import annotations

import random
import statistics
import sys
from typing import Callable, Dict, List, Sequence

import torch

Calls = Sequence[Callable[[], object]]


def require_gpu(script: str, seed: int = 0) -> None:
    """A benchmark's first step: exit with a message naming ``script`` when there is no CUDA GPU, then
    seed torch's generators (every run draws the same inputs)."""
    if not torch.cuda.is_available():
        sys.exit(f"{script} needs a CUDA GPU (sm_90a)")
    torch.manual_seed(seed)


def rotation_count(bytes_per_set: int, device=None, factor: int = 3) -> int:
    """How many input sets make the working set ``factor`` times the L2 (at least 2)."""
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 << 20)
    return max(2, -(-factor * l2 // max(bytes_per_set, 1)))


# Eager timings start behind a short GPU sleep: the host enqueues the first calls while the GPU
# waits, so one call's host latency is not on the clock of a back-to-back run (a 10-call prefill
# sample would otherwise charge a tenth of it to every call).  Host-bound runs stay host-bound.
LEAD_CYCLES = 200_000


def _event_time(run: Callable[[], None], lead: bool = False) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if lead:
        torch.cuda._sleep(LEAD_CYCLES)
    start.record()
    run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def _eager_runner(calls: Calls, n: int) -> Callable[[], None]:
    for c in calls:  # warm-up: builds, workspaces, lazy module loads
        c()

    def run():
        for i in range(n):
            calls[i % len(calls)]()
    run()
    return run


def _graph_runner(calls: Calls, n: int) -> Callable[[], None]:
    for c in calls:
        c()
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for c in calls:  # side-stream warm-up, as torch.cuda.graphs recommends
            c()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(n):
            calls[i % len(calls)]()
    graph.replay()
    return graph.replay


def time_samples(variants: Dict[str, Calls], graph: bool = False, reps: int = 9,
                 min_calls: int = 64) -> Dict[str, List[float]]:
    """Seconds per call of each variant, one sample per repetition, timed interleaved.

    Eager mode times back-to-back launches (host overhead counts where it dominates, not the first
    call's latency: see LEAD_CYCLES); graph mode
    replays one CUDA graph holding all the calls.  Each variant cycles through its own calls
    (one per rotated input set).
    """
    make = _graph_runner if graph else _eager_runner
    runners = {name: make(calls, max(min_calls, len(calls))) for name, calls in variants.items()}
    torch.cuda.synchronize()
    counts = {name: max(min_calls, len(calls)) for name, calls in variants.items()}
    samples: Dict[str, List[float]] = {name: [] for name in variants}
    names = list(runners)
    for rep in range(reps):
        # Each repetition in its own order (seeded, so runs repeat): a power-bound kernel's clocks
        # depend on what ran just before it (a lighter kernel leaves headroom), and a fixed or merely
        # rotated order gives each variant the same predecessor every time.  On an H200 at
        # M = 16384 that alone moved one kernel 6% against a copy of itself.
        for name in random.Random(rep).sample(names, len(names)):
            samples[name].append(_event_time(runners[name], lead=not graph) / counts[name])
    return samples


def compare(variants: Dict[str, Calls], graph: bool = False, reps: int = 9, min_calls: int = 64) -> Dict[str, float]:
    """Median seconds per call of each variant, timed interleaved (see time_samples)."""
    samples = time_samples(variants, graph, reps, min_calls)
    return {name: statistics.median(ts) for name, ts in samples.items()}


def paired_ratios(samples: Dict[str, List[float]], baseline: str) -> Dict[str, float]:
    """Median over repetitions of each variant's time / the baseline's time in the same repetition:
    clock drift between repetitions cancels, as it does not in a ratio of medians."""
    base = samples[baseline]
    return {name: statistics.median(t / b for t, b in zip(ts, base)) for name, ts in samples.items()}


def per_call(calls: Calls, reps: int = 5, min_calls: int = 200) -> float:
    return compare({"x": calls}, graph=False, reps=reps, min_calls=min_calls)["x"]


def in_graph(calls: Calls, reps: int = 7, min_calls: int = 64) -> float:
    return compare({"x": calls}, graph=True, reps=reps, min_calls=min_calls)["x"]


def warm_gpu(seconds: float = 2.0) -> None:
    """Sustained GEMMs until clocks and temperature settle, so every row sees the steady state
    that serving runs in (a cool GPU boosts for a second or two, unevenly across kernels)."""
    import time
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(10):
            torch.mm(a, a)
        torch.cuda.synchronize()


def copy_bandwidth(nbytes: int = 2 << 30, reps: int = 10) -> float:
    """Device copy bandwidth in bytes/s, counting bytes read plus bytes written (the HBM floor's
    yardstick: a weight-bound kernel reads its weights once)."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    dst.copy_(src)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        times.append(_event_time(lambda: dst.copy_(src)))
    return 2 * nbytes / statistics.median(times)
