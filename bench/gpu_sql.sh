#!/usr/bin/env bash
# bench/gpu_sql.sh: the GPU paths end to end through SQL, on the GPU machine
# after `. .gpu/device-env.sh`, `pgmake CUDA=1 install` and
# `pg_start "shared_preload_libraries = 'clustervec'" ...`:
#
#   bash bench/gpu_sql.sh ROWS DIMS CLUSTERS LISTS
#
# Loads ROWS x DIMS clustered vectors (4 parallel binary COPYs), then times
# cluster_health (GPU) on all rows, CREATE INDEX (GPU; CPU k-means measured
# on a 100k-row sample with one iteration and extrapolated), batch search
# through cvsearch at a probes setting that reaches recall@10 >= 0.95, and
# single queries (pgbench, p50/p99).  Prints one table per part.
set -uo pipefail
rows=${1:-1000000}; dims=${2:-1024}; clusters=${3:-1000}; lists=${4:-4096}
declare -F pg_psql >/dev/null || . .gpu/device-env.sh
q() { pg_psql -X -q -At "$@"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

echo "== data: $rows x $dims, $clusters clusters"
"${PYTHON:-python3}" bench/gpu_data.py "$rows" "$dims" "$clusters" 4 /tmp/cvbench || exit 1
chmod a+r /tmp/cvbench.*
q -c "CREATE TABLE items (id int8, c int4, v cvec($dims)); ALTER TABLE items ALTER v SET STORAGE EXTERNAL"
t=$(now)
for p in 0 1 2 3; do q -c "COPY items FROM '/tmp/cvbench.$p' WITH (FORMAT binary)" & done; wait
echo "load: $(since "$t") s"
q -c "VACUUM ANALYZE items"
q -c "CREATE TABLE queries AS SELECT row_number() OVER () AS qid, v::cvec($dims) AS v FROM (SELECT unnest(string_to_array(pg_read_file('/tmp/cvbench.queries'), E'\n')) v) s WHERE v <> ''"

if [ -z "${SKIP_HEALTH:-}" ]; then
echo "== cluster_health on the GPU"
t=$(now)
q -c "SET clustervec.gpu = require; SET clustervec.health_memory = '4GB'; CREATE TABLE health AS SELECT * FROM cluster_health('items', 'c', 'v', progress => false)"
echo "cluster_health, $rows x $dims, $clusters clusters, all 38 columns: $(since "$t") s"
q -c "SELECT count(*) AS clusters, sum(n) AS n, round(avg(inertia)::numeric, 1) AS avg_inertia, round(avg(sigma)::numeric, 4) AS avg_sigma, count(effective_rank) AS ranked FROM health"
fi

echo "== CREATE INDEX on the GPU ($lists lists)"
t=$(now)
q -c "SET clustervec.gpu = require; SET maintenance_work_mem = '8GB'; CREATE INDEX items_ivf ON items USING cvivf (v cvec_l2_ops) WITH (lists = $lists)"
echo "CREATE INDEX, GPU k-means and assignment: $(since "$t") s"
q -c "SELECT index_builds, health_runs FROM clustervec_gpu_info()"

echo "== search"
q -c "SET clustervec.gpu = require; SELECT clustervec_gpu_warm('items_ivf')"
q -c "CREATE TABLE truth AS SELECT query_no, tid FROM cvsearch_exact('items', 'v', (SELECT array_agg(v ORDER BY qid) FROM queries WHERE qid <= 200), 10)"
q -c "CREATE INDEX ON truth (query_no)"
for probes in 1 2 4 8 16 32; do
  t=$(now)
  q -c "SET clustervec.gpu = require; DROP TABLE IF EXISTS r; CREATE TABLE r AS SELECT * FROM cvsearch('items_ivf', (SELECT array_agg(v ORDER BY qid) FROM queries), 10, $probes)"
  took=$(since "$t")
  q -c "SELECT 'probes $probes: recall@10 ' || round(avg(hit)::numeric, 4) || ', 1000 queries in one cvsearch: $took s' FROM (SELECT (SELECT count(*) FROM truth t WHERE t.query_no = r.query_no AND t.tid = r.tid)::float8 AS hit FROM r WHERE query_no <= 200) s"
done
single() {
  rm -f /tmp/pgb*
  echo "$2" > /tmp/one.sql
  LD_LIBRARY_PATH=/opt/pglibs $PGBIN/pgbench -n -c 1 -T "${PGBENCH_SECONDS:-10}" -f /tmp/one.sql --log --log-prefix=/tmp/pgb postgres 2>&1 | grep -E "^tps"
  cat /tmp/pgb* | awk '{print $3}' | sort -n | awk -v what="$1" '{a[NR]=$1} END {print what ": p50 " a[int(NR*0.5)] " us, p99 " a[int(NR*0.99)] " us, n " NR}'
}
echo "== single queries (pgbench, 1 client), probes 8, k = 10"
single "cvsearch, one query" "\\set qid random(1, 1000)
SELECT count(*) FROM cvsearch('items_ivf', ARRAY[(SELECT v FROM queries WHERE qid = :qid)], 10, 8);"
single "ORDER BY v <-> q LIMIT 10, GPU" "\\set qid random(1, 1000)
SET clustervec.gpu = require; SET clustervec.probes = 8;
SELECT id FROM items ORDER BY v <-> (SELECT v FROM queries WHERE qid = :qid) LIMIT 10;"
single "ORDER BY v <-> q LIMIT 10, CPU" "\\set qid random(1, 1000)
SET clustervec.gpu = off; SET clustervec.probes = 8;
SELECT id FROM items ORDER BY v <-> (SELECT v FROM queries WHERE qid = :qid) LIMIT 10;"
q -c "SET clustervec.gpu = require; SET clustervec.probes = 8; EXPLAIN (COSTS OFF) SELECT id FROM items ORDER BY v <-> (SELECT v FROM queries WHERE qid = 1) LIMIT 10"
