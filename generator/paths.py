"""Where the templates and hand-written C++ live: inside the installed package (pip install puts
them at fused_gemm/templates and fused_gemm/csrc), or at the top of a source checkout used through
an editable install (the repository keeps them there: templates/, csrc/)."""
from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def _find(name: str) -> Path:
    candidate = _HERE.parent / name
    if candidate.is_dir():
        return candidate
    raise FileNotFoundError(f"fused-gemm is missing its {name}/ folder (looked beside {_HERE})")


def templates_dir() -> Path:
    return _find("templates")


def csrc_dir() -> Path:
    return _find("csrc")
