"""C ABI structs, described once: each family's problem struct is a field table here, from which
the generator renders the C declaration (with static_asserts on every offset and the size) into the
kernel source, and the runtime builds its ``struct.Struct`` packer.  Neither side is written by
hand, so they cannot drift apart; a library also reports its sizeof at load time.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Tuple

# field kind -> (C type, struct code, size in bytes)
KINDS = {
    "i32": ("int32_t", "i", 4),
    "i64": ("int64_t", "q", 8),
    "u64": ("uint64_t", "Q", 8),
    "f32": ("float", "f", 4),
    "ptr": ("void *", "Q", 8),
    "cptr": ("const void *", "Q", 8),
}


@dataclass(frozen=True)
class Field:
    name: str
    kind: str
    doc: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"ABI field {self.name}: unknown kind {self.kind!r}")


@dataclass(frozen=True)
class AbiStruct:
    """A C struct with natural alignment and no padding (checked here, asserted again in C)."""
    name: str                      # the C type name, e.g. FgGemmProblem
    version: int                   # bumped whenever the fields or the exported functions change
    fields: Tuple[Field, ...]

    def __post_init__(self):
        offset = 0
        for f in self.fields:
            size = KINDS[f.kind][2]
            if offset % size:
                raise ValueError(f"{self.name}.{f.name} at offset {offset} is not {size}-byte aligned: "
                                 "reorder the fields or add an explicit reserved field")
            offset += size
        if offset % 8:
            raise ValueError(f"{self.name} is {offset} bytes, not a multiple of 8: add a reserved field")

    @property
    def format(self) -> str:
        return "<" + "".join(KINDS[f.kind][1] for f in self.fields)

    @property
    def size(self) -> int:
        return struct.calcsize(self.format)

    @property
    def names(self) -> Tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def offsets(self):
        offset = 0
        for f in self.fields:
            yield f, offset
            offset += KINDS[f.kind][2]

    def c_declaration(self) -> str:
        """The typedef, its version macro and compile-time checks of the layout Python packs."""
        macro = "FG_" + "".join("_" + c if c.isupper() else c.upper() for c in self.name[2:]).lstrip("_")
        lines = ["// Generated from generator/abi.py; Python packs exactly this layout.",
                 f"#define {macro}_ABI_VERSION {self.version}",
                 f"typedef struct {self.name} {{"]
        for f in self.fields:
            ctype = KINDS[f.kind][0]
            sep = "" if ctype.endswith("*") else " "
            comment = f"  // {f.doc}" if f.doc else ""
            lines.append(f"  {ctype}{sep}{f.name};{comment}")
        lines.append(f"}} {self.name};")
        lines.append("#ifdef __cplusplus")
        for f, off in self.offsets():
            lines.append(f"static_assert(offsetof({self.name}, {f.name}) == {off}, \"{self.name}.{f.name}\");")
        lines.append(f"static_assert(sizeof({self.name}) == {self.size}, \"sizeof({self.name})\");")
        lines.append("#endif")
        return "\n".join(lines)
