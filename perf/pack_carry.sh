#!/usr/bin/env bash
# Packs what a GPU run needs and the device machine lacks into .carry/ (git-ignored):
# the nvidia-cutlass wheel (the machine has no network) and the kernel cache built here, xz'd
# (63 kernels are ~95 MB raw, ~20 MB packed; a run carries 64 MiB at most).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .carry
ls .carry/nvidia_cutlass-*.whl >/dev/null 2>&1 || python3 -m pip download -q --no-deps nvidia-cutlass==4.2.0.0 -d .carry
tar --exclude='*.lock' --exclude='*.tmp*' -cJf .carry/fgcache.tar.xz .fgcache
du -sh .carry/*
