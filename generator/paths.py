"""Where the templates and hand-written C++ live: inside the installed package, or beside it in a
source checkout (the repository keeps them at the top level: templates/, csrc/)."""
from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def _find(name: str) -> Path:
    for candidate in (_HERE.parent / name, _HERE.parent.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"fused-gemm is missing its {name}/ folder (looked beside {_HERE})")


def templates_dir() -> Path:
    return _find("templates")


def csrc_dir() -> Path:
    return _find("csrc")
