"""The `fused-gemm` command: the generator's commands (no GPU, no torch needed) plus sweep/tune/plot."""
from __future__ import annotations

import sys

from .generator import cli as generator_cli


def main(argv=None) -> int:
    from .bench.cli import add_commands
    return generator_cli.main(argv, extend=add_commands)


if __name__ == "__main__":
    sys.exit(main())
