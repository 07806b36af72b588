"""GPU timing helpers: CUDA events, warm-up first, medians, inputs rotated past the L2."""
from __future__ import annotations

import statistics
from typing import Callable, List, Sequence

import torch


def rotation_count(bytes_per_set: int, device=None, factor: int = 3) -> int:
    """How many input sets make the working set ``factor`` times the L2 (at least 2)."""
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 << 20)
    return max(2, -(-factor * l2 // max(bytes_per_set, 1)))


def per_call(calls: Sequence[Callable[[], object]], reps: int = 5, min_calls: int = 200) -> float:
    """Median seconds per call of back-to-back launches (host overhead counts if it dominates)."""
    n = max(min_calls, len(calls))
    for c in calls:  # warm-up: builds, workspaces, lazy module loads
        c()
    torch.cuda.synchronize()
    times: List[float] = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(n):
            calls[i % len(calls)]()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / n)
    return statistics.median(times)


def in_graph(calls: Sequence[Callable[[], object]], reps: int = 7, min_calls: int = 64) -> float:
    """Median seconds per call when one CUDA graph replays every call back to back."""
    n = max(min_calls, len(calls))
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
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / n)
    return statistics.median(times)
