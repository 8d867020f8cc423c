#!/usr/bin/env bash
# test/gpu/all.sh: everything GPU in one device call (build, the CUDA
# harness, the GPU TAP tests on the real library, the SQL benchmark),
# writing logs under $OUT.  Each phase has its own time limit.
#   bash test/gpu/all.sh [bench rows] [dims] [clusters] [lists]
# CUDA_TESTS="observe_test ivf_search_test" runs only those cuda/tests;
# TAP_FILES names the TAP files (default 104); BENCH the benchmark script
# (default bench/gpu_sql.sh; "none" skips it).
set -uo pipefail
. .gpu/device-env.sh || exit 1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
GEN='-gencode arch=compute_90,code=sm_90'
t0=$(date +%s)
{ pgmake CUDA=1 -j16 CUDA_GENCODE="$GEN" && pgmake CUDA=1 install CUDA_GENCODE="$GEN"; } > "$OUT/build.log" 2>&1 \
  || { tail -40 "$OUT/build.log"; exit 1; }
grep -i "warning" "$OUT/build.log" | head -5
echo "build: $(( $(date +%s) - t0 )) s"
if [ -n "${CUDA_TESTS:-}" ]; then
  make -f cuda/standalone.mk cputest-programs > "$OUT/cudatest.log" 2>&1
  for t in $CUDA_TESTS; do
    timeout "${CUDATEST_SECONDS:-300}" "cuda/tests/$t" cuda/clustervec_cuda.so --require-device >> "$OUT/cudatest.log" 2>&1
    echo "$t rc=$?: $(tail -1 "$OUT/cudatest.log")"
  done
elif [ "${CUDATEST_SECONDS:-300}" -gt 0 ]; then
  timeout "${CUDATEST_SECONDS:-300}" make -f cuda/standalone.mk CUDA_GENCODE="$GEN" cudatest > "$OUT/cudatest.log" 2>&1
  echo "cudatest rc=$?"; grep -E "^[0-9]+ passed|^not ok|FAIL" "$OUT/cudatest.log" | head -20
fi
CV_GPU_LIBRARY=clustervec_cuda timeout "${TAP_SECONDS:-150}" bash -c ". .gpu/device-env.sh; pg_prove ${TAP_FILES:-test/t/104_gpu_paths.pl}" > "$OUT/tap.log" 2>&1
echo "tap rc=$?"; grep -E "^not ok|^Result|^Files|Failed test" "$OUT/tap.log" | head -20
echo "elapsed: $(( $(date +%s) - t0 )) s"
[ "${BENCH:-}" = none ] && exit 0
pg_start "shared_preload_libraries = 'clustervec'" "max_worker_processes = 16" "shared_buffers = 24GB" \
  "max_wal_size = 64GB" "wal_level = minimal" "max_wal_senders = 0" "work_mem = 256MB" || exit 1
sleep 2
pg_psql -q -c "CREATE EXTENSION clustervec"
timeout "${BENCH_SECONDS:-280}" bash "${BENCH:-bench/gpu_sql.sh}" "$@" 2>&1 | tee "$OUT/bench.log"
pg_stop
echo "total: $(( $(date +%s) - t0 )) s"
