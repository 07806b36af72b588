#!/usr/bin/env bash
# Packs what a GPU run needs and the device machine lacks into .carry/ (git-ignored):
# the nvidia-cutlass wheel (the machine has no network) and the kernel cache built here, xz'd: the
# current build of every kernel of every preset (tests, benches, tuner candidates, shipped tables)
# that is in the cache, not stale builds of older sources (354 kernels are ~250 MB raw, ~23 MB packed;
# a run carries 64 MiB at most).  Build first: fused-gemm build --preset NAME.
#   bash perf/pack_carry.sh [PRESET | uri:URI ...]     (default: every preset but the compile-only and sweep ones)
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .carry
ls .carry/nvidia_cutlass-*.whl >/dev/null 2>&1 || python3 -m pip download -q --no-deps nvidia-cutlass==4.2.0.0 -d .carry
list=$(mktemp)
FUSED_GEMM_CACHE_DIR=${FUSED_GEMM_CACHE_DIR:-$PWD/.fgcache} python3 - "$list" "$@" <<'EOF'
import os, sys
from fused_gemm.generator import locate, preset, spec_from_uri
from fused_gemm.generator.registry import preset_names
names = sys.argv[2:] or [p for p in preset_names() if not p.endswith(("compile-ci", "-sweep"))]
folders, missing = set(), []
for name in names:
    for spec in ([spec_from_uri(name[4:])] if name.startswith("uri:") else preset(name)):
        entry = locate(spec)
        (folders.add(os.path.relpath(entry.folder)) if entry.is_built() else missing.append(spec.uri))
open(sys.argv[1], "w").write("\n".join(sorted(folders)))
print(f"{len(folders)} kernels to carry; {len(missing)} not built here (the device builds them):", *missing[:10], sep="\n  ")
EOF
XZ_OPT="-6 -T0" tar --exclude='*.lock' --exclude='*.tmp*' --exclude='kernel.cu' -cJf .carry/fgcache.tar.xz -T "$list"
rm -f "$list"
du -sh .carry/*
