#!/usr/bin/env bash
# One whole check on the GPU machine (the `device` tool runs it from the repository root):
# install the carried CUTLASS wheel and this checkout (editable, no network), unpack the carried
# kernel cache, build whatever it lacks (all cores, bounded by memory), run the GPU tests and the
# benchmarks.  Full logs land in $OUT; the summary prints last.
# Carry .carry/ (made here by perf/pack_carry.sh: the nvidia-cutlass wheel, fgcache.tar.xz).
#   bash perf/device_check.sh [build|build:PRESET|bg-build:PRESET,..|wait|tests|test:FILE|bench|gated|rope|attention|short-attention|decode|gemm-decode|gated-vs-gemm|read-floor|stream-floor|mufu-rate|sweep-fp8|sweep-attention|fp8|fp8-heuristic|fp8-graph|int4|int4-launch|int4-gated|fp8-weight|host|tune|tune:OP|sweep|sweep-linear|ncu:KIND,..|all]...
set -uo pipefail
OUT=${OUT:-/tmp/fg_out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .carry/*.whl >/dev/null 2>&1 \
  || { echo "could not install the carried wheels in .carry/"; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 FUSED_GEMM_CACHE_DIR=$PWD/.fgcache
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . > /tmp/install.log 2>&1 \
  || { echo "could not install fused-gemm"; tail -20 /tmp/install.log; exit 1; }
[ -f .carry/fgcache.tar.xz ] && [ ! -d .fgcache ] && tar -xJf .carry/fgcache.tar.xz
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/device.txt"
fused-gemm info | tee -a "$OUT/device.txt"
steps=${*:-all}
status=0
bg_pids=()
run() { local name=$1; shift; echo "== $name"; "$@" > "$OUT/$name.log" 2>&1; local rc=$?; tail -n 30 "$OUT/$name.log"; [ $rc -eq 0 ] || { echo "== $name exit $rc"; status=1; }; }
for step in $steps; do
  case $step in
    build) for p in gpu-tests gemm-decode-tests gated-tests rope-tests attention-tests attention-sm80-tests decode-tests fp8-gpu-tests int4-gpu-tests int4-gated-tests int4-bench fp8-weight-gpu-tests fp8-weight-bench; do run "build-$p" fused-gemm build --preset $p -q; done ;;
    build:*) run "build-${step#build:}" fused-gemm build --preset "${step#build:}" -q ;;
    bg-build:*) # e.g. bg-build:int4-gated-tests,int4-gpu-tests ... wait (in the same invocation): builds on the CPUs while GPU steps run
             (rc=0; IFS=,; for p in ${step#bg-build:}; do fused-gemm build --preset "$p" -q || rc=1; done; exit $rc) \
               >> "$OUT/bg-build.log" 2>&1 &
             bg_pids+=($!); echo "== bg-build started" ;;
    wait) for pid in "${bg_pids[@]}"; do wait "$pid" || { echo "== bg-build failed"; status=1; }; done
          bg_pids=(); echo "== bg-build done"; tail -n 5 "$OUT/bg-build.log" ;;
    tests) run tests python3 -m pytest tests -q --maxfail=40 -m "not compile and not toolchain" -p no:cacheprovider ;;
    test:*) run "test-${step#test:}" python3 -m pytest "tests/${step#test:}" -q --maxfail=20 -p no:cacheprovider ${TEST_ARGS:-} ;;   # TEST_ARGS e.g. "-k sm90a" (split on spaces: no quoted expressions)
    bench) run bench python3 perf/bench_linear.py --json "$OUT/bench.json" ;;
    gated) run gated python3 perf/bench_gated.py --json "$OUT/gated.json" ;;
    rope) run rope python3 perf/bench_rope.py --json "$OUT/rope.json" ${ROPE_ARGS:-} ;;   # ROPE_ARGS e.g. "--m 1024 --launch-sweep CONFIG.."
    attention) run attention python3 perf/bench_attention.py --json "$OUT/attention.json" ${ATTENTION_ARGS:-} ;;   # e.g. "--pairwise"
    attention-quick) run attention python3 perf/bench_attention.py --quick --json "$OUT/attention.json" ;;
    short-attention) run short-attention python3 perf/short_attention.py ${SHORT_ARGS:-} ;;   # e.g. "--s 1 16"
    decode) run decode python3 perf/bench_decode.py --json "$OUT/decode.json" ${DECODE_ARGS:-} ;;   # e.g. "--variants DIR"
    gemm-decode) run gemm-decode python3 perf/bench_gemm_decode.py --json "$OUT/gemm_decode.json" ${GEMM_DECODE_ARGS:-} ;;   # e.g. "--m 1"
    fp8) run fp8 python3 perf/bench_fp8.py --json "$OUT/fp8.json" ${FP8_ARGS:-} ;;   # FP8_ARGS e.g. "--accum precise"
    fp8-heuristic) run fp8-heuristic env FUSED_GEMM_TUNED=0 python3 perf/bench_fp8.py --json "$OUT/fp8_heuristic.json" ${FP8_ARGS:-} ;;   # FP8_RULES alone (tables off)
    fp8-graph) run fp8-graph python3 perf/bench_fp8.py --graph --json "$OUT/fp8_graph.json" ${FP8_ARGS:-} ;;   # prefill rows in CUDA graphs
    int4) run int4 python3 perf/bench_int4.py --json "$OUT/int4.json" ${INT4_ARGS:-} ;;   # INT4_ARGS e.g. "--sweep"
    int4-launch) run int4-launch python3 perf/int4_decode_launch.py ${INT4_LAUNCH_ARGS:-} ;;   # e.g. "--m 1 --splits 0 2"
    int4-gated) run int4-gated python3 perf/bench_int4_gated.py --json "$OUT/int4_gated.json" ;;
    fp8-weight) run fp8-weight python3 perf/bench_fp8_weight.py --json "$OUT/fp8_weight.json" ${FP8W_ARGS:-} ;;   # FP8W_ARGS e.g. "--sweep"
    sweep-attention) run sweep-attention python3 perf/sweep_attention.py --json "$OUT/sweep_attention.json" ${SWEEP_ATTENTION_ARGS:-} ;;   # e.g. "--s 1024 --pingpong"
    tune)  # TUNE_ARGS e.g. "--preset llama3-8b --preset square-8192 --minimal"; the table and raw timings come back
           run tune fused-gemm tune ${TUNE_ARGS:---minimal} -q --results "$OUT"
           cp "$(ls -t generator/gemm/tuned/*.json | head -1)" "$OUT/" ;;   # this GPU's table: the one just written
    tune:*) # one op (linear, gated, fp8, fp8_fast, qkv_rope) with TUNE_OP_ARGS, e.g. "--preset llama3-8b"; the merged table comes back
           run "tune-${step#tune:}" fused-gemm tune --op "${step#tune:}" ${TUNE_OP_ARGS:-} --no-build -q --results "$OUT"
           cp "$(ls -t generator/gemm/tuned/*.json | head -1)" "$OUT/" ;;
    sweep-linear) # SWEEP_ARGS e.g. "--preset llama3-8b --preset square-8192"; CSV + JSON come back (plots are made here)
           run sweep-linear fused-gemm sweep --op linear ${SWEEP_ARGS:---preset llama3-8b --preset square-8192} \
             --out "$OUT" --name "sweep_${SWEEP_NAME:-linear}" --no-plots -q ;;
    sweep) # any ops: SWEEP_ARGS e.g. "--op attention --op decode_attention --preset llama3-8b"; CSV + JSON come back
           run sweep fused-gemm sweep ${SWEEP_ARGS:---preset llama3-8b} --out "$OUT" --name "sweep_${SWEEP_NAME:-ops}" --no-plots -q ;;
    gated-vs-gemm) run gated-vs-gemm python3 perf/gated_vs_gemm.py ${GVG_ARGS:-16384 --sustained 3} ;;   # GVG_ARGS e.g. "16384 --config t128x192x64_c1x2x1_pp_persist --swizzle 4 --raster heuristic"
    sweep-fp8) run sweep-fp8 python3 perf/sweep_fp8.py --json "$OUT/sweep_fp8.json" ${SWEEP_FP8_ARGS:-} ;;   # e.g. "--accum precise --m 4096 --variants DIR"
    sweep-gated) run sweep-gated python3 perf/sweep_gated.py --json "$OUT/sweep_gated.json" ${SWEEP_M:+--m $SWEEP_M} ${SWEEP_GATED_ARGS:-} ;;
    ncu:*) IFS=, read -ra kinds <<< "${step#ncu:}"
           for kind in "${kinds[@]}"; do   # e.g. ncu:rope,gemm  (M from NCU_M, default 4096; NCU_ARGS e.g. "--n 28672")
             run "ncu-$kind" ncu --clock-control none -k "regex:${NCU_KERNEL:-device_kernel}" --launch-skip 3 --launch-count 1 \
               --set full --import-source yes -f -o "$OUT/ncu_$kind" python3 perf/profile_kernels.py "$kind" --m "${NCU_M:-4096}" ${NCU_ARGS:-}
             ncu --import "$OUT/ncu_$kind.ncu-rep" --page details > "$OUT/ncu_${kind}_details.txt" 2>&1
             ncu --import "$OUT/ncu_$kind.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_${kind}_sass.csv" 2>&1
             rm -f "$OUT/ncu_$kind.ncu-rep"   # the two exports above are what comes back
           done ;;
    host)  run host python3 perf/host_overhead.py ;;
    read-floor) run read-floor python3 perf/decode_read_floor.py ;;   # pure reads of the decode weights vs the floor
    stream-floor) run stream-floor bash -c 'nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a perf/stream_read_floor.cu -o /tmp/stream_read_floor && /tmp/stream_read_floor ${STREAM_FLOOR_ARGS:-}' ;;   # read-only kernels: a reference beside the decode floor (STREAM_FLOOR_ARGS=--int4: issue 8's int4 shapes)
    mufu-rate) run mufu-rate bash -c 'nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a perf/mufu_rate.cu -o /tmp/mufu_rate && /tmp/mufu_rate' ;;   # exp2 rate by operand type
    cache-out) XZ_OPT=-T0 tar --exclude='*.lock' --exclude='*.tmp*' -cJf "$OUT/fgcache.tar.xz" .fgcache ;;   # what this machine built, back
    build-all) # logs stay on the machine: a run brings back at most 8 files (the cache-out tarball among them)
               for p in gpu-tests gemm-decode-tests gated-tests rope-tests rope-bench attention-tests attention-bench attention-sm80-tests decode-tests gated-bench bench fp8-gpu-tests fp8-bench int4-gpu-tests int4-bench fp8-weight-gpu-tests fp8-weight-bench; do
                 fused-gemm build --preset $p -q > /tmp/build-$p.log 2>&1 || { echo "== build-$p failed"; tail -5 /tmp/build-$p.log; status=1; }
               done ;;
    all)   run build fused-gemm build --preset gpu-tests -q
           run build-gated fused-gemm build --preset gated-tests -q
           run build-rope fused-gemm build --preset rope-tests -q
           run build-attention fused-gemm build --preset attention-tests -q
           run build-attention-sm80 fused-gemm build --preset attention-sm80-tests -q
           run build-decode fused-gemm build --preset decode-tests -q
           run build-fp8 fused-gemm build --preset fp8-gpu-tests -q
           run build-int4 fused-gemm build --preset int4-gpu-tests -q
           run build-fp8-weight fused-gemm build --preset fp8-weight-gpu-tests -q
           run tests python3 -m pytest tests -q -m "not compile and not toolchain" -p no:cacheprovider
           run host python3 perf/host_overhead.py
           run bench python3 perf/bench_linear.py --json "$OUT/bench.json"
           run gated python3 perf/bench_gated.py --json "$OUT/gated.json"
           run rope python3 perf/bench_rope.py --json "$OUT/rope.json"
           run attention python3 perf/bench_attention.py --json "$OUT/attention.json"
           run decode python3 perf/bench_decode.py --json "$OUT/decode.json"
           run fp8 python3 perf/bench_fp8.py --json "$OUT/fp8.json"
           run int4 python3 perf/bench_int4.py --json "$OUT/int4.json"
           run fp8-weight python3 perf/bench_fp8_weight.py --json "$OUT/fp8_weight.json" ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
exit $status
