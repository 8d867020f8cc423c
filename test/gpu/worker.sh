#!/usr/bin/env bash
# test/gpu/worker.sh: on the GPU machine, the GPU worker's TAP scenarios
# with the real CUDA library (test/t/10*_gpu_*.pl, CV_GPU_LIBRARY =
# clustervec_cuda), then the round-trip and cvsearch_exact benchmarks of the
# worker issue: empty pings from 1 and 16 sessions (pgbench), and
# cvsearch_exact on 1,000,000 x 128 with 1,000 queries, GPU against CPU.
set -uo pipefail
if ! declare -F pgmake >/dev/null; then
  . .gpu/device-env.sh || exit 1
fi
pgmake CUDA=1 -j"$(nproc)" >/tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
pgmake CUDA=1 install >/dev/null 2>&1
echo "== TAP with the CUDA library"
export CV_GPU_LIBRARY=clustervec_cuda
pg_prove test/t/101_gpu_worker.pl test/t/102_gpu_restart.pl test/t/103_gpu_crash.pl 2>&1 | grep -E "^(ok|not ok|test/t|Files|Result|#.*fail)" | grep -v "^ok" | tail -20

echo "== round trips and cvsearch_exact"
pg_start "shared_preload_libraries = 'clustervec'" "max_connections = 100" >/dev/null || exit 1
sleep 3
pg_psql -q -c "CREATE EXTENSION clustervec"
echo "SELECT clustervec_gpu_ping(0);" > /tmp/ping.sql
for clients in 1 16; do
  su pg -c "LD_LIBRARY_PATH=/opt/pglibs $PGBIN/pgbench -n -h /tmp/pgsock -p $PGPORT -U pg -c $clients -j $clients -T 10 -f /tmp/ping.sql postgres" 2>&1 \
    | grep -E "latency average|tps" | sed "s/^/$clients sessions: /"
done
pg_psql -Atc "SELECT 'one session, 10000 pings: p50 ' || percentile_cont(0.5) WITHIN GROUP (ORDER BY t) || ' us, p99 ' || percentile_cont(0.99) WITHIN GROUP (ORDER BY t) || ' us' FROM (SELECT clustervec_gpu_ping(0) t FROM generate_series(1, 10000)) s"
pg_psql -q <<'SQL'
SET max_parallel_workers_per_gather = 0;
CREATE TABLE base (id int, v cvec(128));
INSERT INTO base SELECT i, (SELECT array_agg(((hashint4(i * 131 + j) % 2000) / 1000.0)::real ORDER BY j) FROM generate_series(1, 128) j WHERE i > -j)::cvec FROM generate_series(1, 1000000) i;
CREATE TABLE qs AS SELECT array_agg(v ORDER BY id) AS queries FROM base WHERE id % 1000 = 7;
SQL
for mode in require off; do
  start=$(date +%s.%N)
  pg_psql -q -c "SET clustervec.gpu = $mode" -c "CREATE TABLE ans_$mode AS SELECT * FROM cvsearch_exact('base', 'v', (SELECT queries FROM qs), 10)"
  end=$(date +%s.%N)
  echo "cvsearch_exact 1,000,000 x 128, 1,000 queries, k = 10, clustervec.gpu = $mode: $(python3 -c "print(round($end - $start, 2))") s"
done
pg_psql -Atc "SELECT 'equal answers: ' || count(*) FILTER (WHERE a.tid = b.tid AND a.distance = b.distance) || ' of ' || count(*) FROM ans_require a FULL JOIN ans_off b USING (query_no, rank)"
pg_stop >/dev/null
