#!/usr/bin/env bash
# One whole check on the GPU machine (the `device` tool runs it from the repository root):
# install the carried CUTLASS wheel, unpack the carried kernel cache, build whatever it lacks (all
# cores), run the GPU tests and the benchmark.  Full logs land in $OUT; the summary prints last.
# Carry .carry/ (made here by perf/pack_carry.sh: the nvidia-cutlass wheel, fgcache.tar.xz).
#   bash perf/device_check.sh [tests|bench|sweep|all]...
set -uo pipefail
OUT=${OUT:-/tmp/fg_out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .carry/*.whl >/dev/null 2>&1 \
  || { echo "could not install the carried wheels in .carry/"; exit 1; }
[ -f .carry/fgcache.tar.xz ] && tar -xJf .carry/fgcache.tar.xz
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 FUSED_GEMM_CACHE_DIR=$PWD/.fgcache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/device.txt"
python3 -m fused_gemm.generator.cli info | tee -a "$OUT/device.txt"
steps=${*:-all}
status=0
run() { local name=$1; shift; echo "== $name"; "$@" > "$OUT/$name.log" 2>&1; local rc=$?; tail -n 25 "$OUT/$name.log"; [ $rc -eq 0 ] || { echo "== $name exit $rc"; status=1; }; }
for step in $steps; do
  case $step in
    build) run build python3 -m fused_gemm.generator.cli build --preset gpu-tests -q -j 16 ;;
    tests) run build python3 -m fused_gemm.generator.cli build --preset gpu-tests -q -j 16
           run tests python3 -m pytest tests -q -m "not compile" -p no:cacheprovider ;;
    bench) run bench python3 perf/bench_linear.py --json "$OUT/bench.json" ;;
    sweep) run sweep python3 perf/sweep.py --json "$OUT/sweep.json" ;;
    host)  run host python3 perf/host_overhead.py ;;
    all)   run build python3 -m fused_gemm.generator.cli build --preset gpu-tests -q -j 16
           run tests python3 -m pytest tests -q -m "not compile" -p no:cacheprovider
           run host python3 perf/host_overhead.py
           run bench python3 perf/bench_linear.py --json "$OUT/bench.json" ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
exit $status
