"""What a result file records about where it was measured: GPU, driver, clocks, CUDA, torch, CUTLASS
(describe, for the sweep's files); write_rows writes the perf/bench_*.py scripts' --json files."""
from __future__ import annotations

import datetime
import json
import re
import subprocess
from pathlib import Path
from typing import Dict, List, Optional

import torch


def _nvidia_smi(query: str) -> str:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader", "-i",
                              str(torch.cuda.current_device())], capture_output=True, text=True, timeout=20)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def gpu_slug(name: str = "") -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100': the results folder and the tuned table's name."""
    from ..generator.gemm.tuned import gpu_key
    return gpu_key(name or torch.cuda.get_device_name())


def describe() -> Dict[str, object]:
    from .. import __version__
    from ..generator.build import toolchain
    env: Dict[str, object] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": torch.cuda.get_device_name(), "capability": list(torch.cuda.get_device_capability()),
        "torch": torch.__version__, "cuda": torch.version.cuda, "fused_gemm": __version__,
    }
    smi = _nvidia_smi("driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit")
    if smi:
        keys = ("driver", "sm_clock", "max_sm_clock", "mem_clock", "power_limit")
        env.update(dict(zip(keys, (re.sub(r"\s+", " ", v).strip() for v in smi.split(",")))))
    try:
        tc = toolchain()
        env.update({"cutlass": tc.cutlass_version, "nvcc": tc.nvcc_version})
    except Exception as exc:  # noqa: BLE001 - a results file without a toolchain line is still useful
        env["toolchain"] = f"unavailable: {exc}"
    return env


def write_rows(path: Optional[str], rows: List[dict], **fields) -> None:
    """Writes {"device", *fields, "rows"} as JSON to ``path``; nothing when there is no path (no --json)."""
    if path:
        Path(path).write_text(json.dumps({"device": torch.cuda.get_device_name(), **fields, "rows": rows}, indent=1))
