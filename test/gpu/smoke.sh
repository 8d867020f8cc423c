#!/usr/bin/env bash
# test/gpu/smoke.sh: on the GPU machine (see ../shared/gpu/README.md), after
#   . .gpu/device-env.sh
# builds and installs clustervec with the CUDA library, runs the CUDA
# harness, then a preloaded server with the real worker: device info, ping
# round trips, and cvsearch_exact on the GPU against the CPU path.
# Prints PASS/FAIL lines and ends with "N passed, N failed".
set -uo pipefail
if ! declare -F pgmake >/dev/null; then
  . .gpu/device-env.sh || exit 1
fi
pass=0; fail=0
check() { if [ "$2" = "$3" ]; then echo "PASS $1"; pass=$((pass+1)); else echo "FAIL $1: got '$2', want '$3'"; fail=$((fail+1)); fi; }

pgmake CUDA=1 -j"$(nproc)" >/tmp/build.log 2>&1 || { tail -30 /tmp/build.log; echo "0 passed, 1 failed"; exit 1; }
pgmake CUDA=1 install >/dev/null 2>&1
grep -E "warning" /tmp/build.log | head -5
echo "== CUDA harness"
pgmake CUDA=1 cudatest 2>&1 | tail -15
cuda/tests/knn_test ./cuda/clustervec_cuda.so --require-device >/tmp/knn.log 2>&1; check "knn_test on the device" "$?" 0
tail -3 /tmp/knn.log

echo "== worker with the CUDA library"
pg_start "shared_preload_libraries = 'clustervec'" || { echo "0 passed, 1 failed"; exit 1; }
sleep 3
pg_psql -q -c "CREATE EXTENSION clustervec"
pg_psql -c "SELECT * FROM clustervec_gpu_info()"
check "worker ready on cuda" "$(pg_psql -Atc "SELECT worker_state || '/' || backend FROM clustervec_gpu_info()")" "ready/cuda"
pg_psql -c "SELECT backend_type, datname FROM pg_stat_activity WHERE backend_type LIKE 'clustervec%'"
for bytes in 0 1048576 16777216; do
  pg_psql -Atc "SELECT '$bytes bytes: p50 ' || round(percentile_cont(0.5) WITHIN GROUP (ORDER BY t)::numeric, 1) || ' us, p99 ' || round(percentile_cont(0.99) WITHIN GROUP (ORDER BY t)::numeric, 1) || ' us' FROM (SELECT clustervec_gpu_ping($bytes) t FROM generate_series(1, CASE WHEN $bytes > 1048576 THEN 200 ELSE 10000 END)) s"
done
pg_psql -q <<'SQL'
SET max_parallel_workers_per_gather = 0;
CREATE TABLE base AS SELECT i AS id, (SELECT array_agg(((hashint4(i * 131 + j) % 2000) / 1000.0)::real ORDER BY j) FROM generate_series(1, 128) j WHERE i > -j)::cvec(128) AS v FROM generate_series(1, 200000) i;
CREATE TABLE qs AS SELECT array_agg(v ORDER BY id) AS queries FROM base WHERE id % 2000 = 7;
SQL
pg_psql -Atc "SELECT 'rows ' || count(*) FROM base" -Atc "SELECT 'queries ' || array_length(queries, 1) FROM qs"
for mode in require off; do
  start=$(date +%s.%N)
  pg_psql -q -c "SET clustervec.gpu = $mode" -c "CREATE TABLE ans_$mode AS SELECT * FROM cvsearch_exact('base', 'v', (SELECT queries FROM qs), 10)"
  end=$(date +%s.%N)
  echo "cvsearch_exact 200,000 x 128, 100 queries, k = 10, clustervec.gpu = $mode: $(python3 -c "print(round($end - $start, 3))") s"
done
check "GPU answers equal the CPU path" "$(pg_psql -Atc "SELECT count(*) FILTER (WHERE a.tid = b.tid AND a.distance = b.distance) || '/' || count(*) FROM ans_require a FULL JOIN ans_off b USING (query_no, rank)")" "1000/1000"
pg_psql -c "SELECT gpu_requests, cpu_fallbacks FROM clustervec_gpu_info()"
pg_stop
echo "$pass passed, $fail failed"
