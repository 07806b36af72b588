"""The kernel-family protocol.  A family is a spec type (frozen, hashable, with ``uri``, ``arch``
and a ``family`` name), its templates, its C ABI struct, its launcher glue in csrc/ and its
runtime op.  Rendering, the cache, ``build``/``build_many``, the CLI and presets reach a family
only through this record, so adding one means its own files plus one entry in ``registry.py``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Protocol, Tuple

from .abi import AbiStruct


class Spec(Protocol):
    family: str        # registry key, also the first word of every URI
    arch: str

    @property
    def uri(self) -> str: ...


@dataclass(frozen=True)
class KernelFamily:
    name: str
    spec_type: type
    abi: AbiStruct
    template: Callable[[Any], str]                    # spec -> template path under templates/
    context: Callable[[Any], Dict[str, Any]]          # spec -> Jinja variables (besides spec and abi)
    presets: Mapping[str, Callable[[], List[Any]]]    # name -> specs, for `build --preset`
    op: str                                           # "module:Class" of the runtime op (imported lazily)
    cutlass_examples: Tuple[str, ...] = ()            # examples/<name> folders put on the include path
    cli: Any = None                                   # module with add_arguments(group) and spec_from_args(args)
    csrc_includes: Tuple[str, ...] = ()               # shared csrc/fused_gemm folders (besides common/) it includes
    nvcc_flags: Tuple[str, ...] = ()                  # codegen flags of its own (they enter the cache key)

    @property
    def csrc_folders(self) -> Tuple[str, ...]:
        """csrc/ folders whose headers its kernels include (they enter the cache key)."""
        return ("fused_gemm/common", f"fused_gemm/{self.name}",
                *(f"fused_gemm/{name}" for name in self.csrc_includes))

    def from_uri(self, uri: str):
        return self.spec_type.from_uri(uri)
