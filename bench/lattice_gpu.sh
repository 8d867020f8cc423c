#!/usr/bin/env bash
# bench/lattice_gpu.sh: cvlattice end to end through SQL on the GPU machine,
# after `. .gpu/device-env.sh`, `pgmake CUDA=1 install` and
# `pg_start "shared_preload_libraries = 'clustervec'" ...`:
#
#   bash bench/lattice_gpu.sh ROWS DIMS CLUSTERS
#
# On bench/gpu_data.py's data (ROWS x DIMS in CLUSTERS labelled clusters,
# loaded unless the table items exists): the cvlattice build against a
# sequential scan that reads every vector; recall@10 and batch QPS of
# cvsearch over the lattice mirror at probes 1..16; the same batch with
# clustervec.observe off and on (first pass, which observes every list it
# probes, and a second one), answers compared; cluster_health_observed
# after the passes against cluster_health; single queries (pgbench, p50/p99)
# unfiltered on the GPU and CPU, label-filtered as routed (the GPU when the
# worker serves), and label-filtered on the CPU through cvlattice against a
# btree on the label + sort (as bench/lattice_cpu.py), with the ratio.
set -uo pipefail
rows=${1:-1000000}; dims=${2:-1024}; clusters=${3:-1000}
declare -F pg_psql >/dev/null || . .gpu/device-env.sh
q() { pg_psql -X -q -At "$@"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }

if [ "$(q -c "SELECT to_regclass('items') IS NOT NULL")" != t ]; then
  echo "== data: $rows x $dims, $clusters clusters"
  "${PYTHON:-python3}" bench/gpu_data.py "$rows" "$dims" "$clusters" 4 /tmp/cvbench || exit 1
  chmod a+r /tmp/cvbench.*
  q -c "CREATE TABLE items (id int8, c int4, v cvec($dims)); ALTER TABLE items ALTER v SET STORAGE EXTERNAL"
  for p in 0 1 2 3; do q -c "COPY items FROM '/tmp/cvbench.$p' WITH (FORMAT binary)" & done; wait
  q -c "VACUUM ANALYZE items"
  q -c "CREATE TABLE queries AS SELECT row_number() OVER () AS qid, v::cvec($dims) AS v FROM (SELECT unnest(string_to_array(pg_read_file('/tmp/cvbench.queries'), E'\n')) v) s WHERE v <> ''"
fi
nq=$(q -c "SELECT count(*) FROM queries")

echo "== build"
q -c "SELECT sum(vector_dims(v)) FROM items" >/dev/null   # warm the cache alike
t=$(now); q -c "SET max_parallel_workers_per_gather = 0; SELECT sum(vector_dims(v)) FROM items" >/dev/null
scan=$(since "$t")
t=$(now); q -c "SET maintenance_work_mem = '8GB'; CREATE INDEX items_lat ON items USING cvlattice (v cvec_l2_ops, c)"
build=$(since "$t")
echo "| what | seconds |"
echo "|---|---|"
echo "| sequential scan reading every vector (one process) | $scan |"
echo "| CREATE INDEX ... USING cvlattice (v, c), $clusters labels | $build |"
awk -v a="$build" -v b="$scan" 'BEGIN { printf "build / scan: %.2f\n", a / b }'

echo "== cvsearch over the lattice mirror ($nq queries per call)"
q -c "SET clustervec.gpu = require; SELECT clustervec_gpu_warm('items_lat')"
q -c "CREATE TABLE truth AS SELECT query_no, tid FROM cvsearch_exact('items', 'v', (SELECT array_agg(v ORDER BY qid) FROM queries WHERE qid <= 200), 10)"
echo "| probes | recall@10 | seconds | queries/s |"
echo "|---|---|---|---|"
for probes in 1 2 4 8 16; do
  t=$(now)
  q -c "SET clustervec.gpu = require; DROP TABLE IF EXISTS r; CREATE TABLE r AS SELECT * FROM cvsearch('items_lat', (SELECT array_agg(v ORDER BY qid) FROM queries), 10, $probes)"
  took=$(since "$t")
  q -c "SELECT '| $probes | ' || round(avg(hit)::numeric, 4) || ' | $took | ' || round($nq / $took) || ' |' FROM (SELECT (SELECT count(*) FROM truth t WHERE t.query_no = r.query_no AND t.tid = r.tid)::float8 AS hit FROM r WHERE query_no <= 200) s"
done

probes=${PROBES:-4}
echo "== observation cost: cvsearch, $nq queries, probes $probes"
batch() {
  local t; t=$(now)
  q -c "SET clustervec.gpu = require; SET clustervec.observe = $2; DROP TABLE IF EXISTS $1; CREATE TABLE $1 AS SELECT * FROM cvsearch('items_lat', (SELECT array_agg(v ORDER BY qid) FROM queries), 10, $probes)"
  local took; took=$(since "$t")
  echo "| $3 | $took | $(awk -v n="$nq" -v s="$took" 'BEGIN { printf "%.0f", n / s }') |"
}
q -c "SELECT cluster_health_observed_reset('items_lat')"
echo "| pass | seconds | queries/s |"
echo "|---|---|---|"
batch r_off1 off "observe off"
batch r_on1 on "observe on, first pass (observes the lists it probes)"
batch r_on2 on "observe on, second pass"
batch r_off2 off "observe off, again"
q -c "SELECT 'rows differing between observe on and off: ' || count(*) FROM ((TABLE r_on1 EXCEPT TABLE r_off1) UNION ALL (TABLE r_off1 EXCEPT TABLE r_on1) UNION ALL (TABLE r_on2 EXCEPT TABLE r_off2)) x"
# one 70 ms batch is noisy: ROUNDS more, off and on alternating, medians
rounds=${ROUNDS:-7}
secs_of() { batch "$1" "$2" x | awk -F'|' '{ gsub(/ /, "", $3); print $3 }'; }
for i in $(seq "$rounds"); do
  echo "off $(secs_of r_off off)"
  echo "on $(secs_of r_on on)"
done | awk -v n="$rounds" '{ v[$1] = v[$1] " " $2 }
  END { for (m in v) { k = split(v[m], a, " "); for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
          med[m] = a[int((k + 1) / 2)] }
        printf "observe off / on, median of %d alternating batches: %.3f / %.3f s (on costs %.1f%%)\n", n, med["off"], med["on"], 100 * (med["on"] / med["off"] - 1) }'

echo "== cluster_health_observed after those passes"
t=$(now); q -c "CREATE TABLE obs AS SELECT * FROM cluster_health_observed('items_lat')"
echo "cluster_health_observed: $(since "$t") s"
q -c "SELECT 'lists ' || count(*) || ', seen ' || count(*) FILTER (WHERE n_seen > 0) || ', coverage of members ' || round(sum(n_seen)::numeric / sum(n), 4) || ', queries counted ' || sum(queries) FROM obs"
if [ -z "${SKIP_HEALTH:-}" ]; then
  t=$(now)
  q -c "SET clustervec.gpu = require; SET clustervec.health_memory = '4GB'; CREATE TABLE health AS SELECT * FROM cluster_health('items', 'c', 'v', progress => false)"
  echo "cluster_health (all 38 columns, GPU): $(since "$t") s"
  q -c "SELECT 'against cluster_health, lists with coverage 1: ' || count(*) || '; largest relative differences: inertia ' || to_char(max(abs(o.inertia_seen - h.inertia) / h.inertia), '9.9EEEE') || ', mean_dist ' || to_char(max(abs(o.mean_dist_seen - h.mean_dist) / h.mean_dist), '9.9EEEE') || ', cohesion ' || to_char(max(abs(o.cohesion_seen - h.cohesion) / abs(h.cohesion)), '9.9EEEE') FROM obs o JOIN health h USING (cluster) WHERE o.coverage = 1"
fi

# one statement per transaction, prepared, settings through PGOPTIONS
single() {
  rm -f /tmp/pgb*
  echo "$3" > /tmp/one.sql
  PGOPTIONS="$2" LD_LIBRARY_PATH=/opt/pglibs $PGBIN/pgbench -n -M prepared -c 1 -T "${PGBENCH_SECONDS:-8}" -f /tmp/one.sql --log --log-prefix=/tmp/pgb postgres >/dev/null 2>&1
  cat /tmp/pgb* | awk '{print $3}' | sort -n | awk -v what="$1" '{a[NR]=$1} END {printf "| %s | %.3f | %.3f | %d |\n", what, a[int(NR*0.5)] / 1000, a[int(NR*0.99)] / 1000, NR}'
}
# The label-filtered query on the CPU through the cvlattice index, then
# through pgvector's only option, as bench/lattice_cpu.py measures it: a
# btree on the label and a top-N sort (index scans off, so the planner
# takes a bitmap scan of the btree; the lattice was measured before the
# btree existed).  Both plans' ids are compared on the first 200 queries.
filtered_sql="\\set qid random(1, $nq)
SELECT id FROM items WHERE c = :qid % $clusters ORDER BY v <-> (SELECT v FROM queries WHERE qid = :qid) LIMIT 10;"
filtered_ids() {
  q -c "SET client_min_messages = warning; SET clustervec.gpu = off; $1 DROP TABLE IF EXISTS $2; CREATE TABLE $2 AS SELECT qid, ARRAY(SELECT id FROM items WHERE c = qid % $clusters ORDER BY v <-> (SELECT v FROM queries p WHERE p.qid = q.qid) LIMIT 10) AS ids FROM queries q WHERE qid <= 200"
}
filtered_plan() {
  q -c "SET clustervec.gpu = off; $1 EXPLAIN (COSTS OFF) SELECT id FROM items WHERE c = 7 ORDER BY v <-> (SELECT v FROM queries WHERE qid = 1) LIMIT 10" |
    sed 's/^ *//; s/^-> *//' | grep -E '^(Sort|Index|Bitmap|Seq)' | grep -v -e 'Key:' -e queries -e qid |
    paste -sd ';' | sed 's/;/, /g'
}
p50_of() { echo "$1" | awk -F'|' '{ gsub(/ /, "", $3); print $3 }'; }
filtered_cpu_against_btree() {
  local lattice btree
  q -c "SET client_min_messages = warning; DROP INDEX IF EXISTS items_c"
  echo "label-filtered on the CPU, cvlattice: $(filtered_plan "")"
  lattice=$(single "WHERE c = label ORDER BY v <-> q LIMIT 10, CPU, cvlattice (one list)" "-c clustervec.gpu=off" "$filtered_sql")
  echo "$lattice"
  filtered_ids "" lat_ids
  q -c "CREATE INDEX items_c ON items (c); ANALYZE items"
  echo "label-filtered, btree: $(filtered_plan "SET enable_indexscan = off;")"
  btree=$(single "WHERE c = label ORDER BY v <-> q LIMIT 10, CPU, btree (c) + sort" "-c clustervec.gpu=off -c enable_indexscan=off" "$filtered_sql")
  echo "$btree"
  filtered_ids "SET enable_indexscan = off;" btree_ids
  q -c "DROP INDEX items_c"
  echo "label-filtered on the CPU: cvlattice $(awk -v a="$(p50_of "$btree")" -v b="$(p50_of "$lattice")" 'BEGIN { printf "%.1f", a / b }')x faster at p50 than btree + sort; the same ids for $(q -c "SELECT count(*) FROM lat_ids l JOIN btree_ids b USING (qid) WHERE l.ids = b.ids") of $(q -c "SELECT count(*) FROM lat_ids") queries"
}
[ -n "${SKIP_SINGLES:-}" ] && exit 0
q -c "CREATE UNIQUE INDEX IF NOT EXISTS queries_qid ON queries (qid)"
echo "== single queries (pgbench -M prepared, 1 client), probes $probes, k = 10"
echo "| query | p50 ms | p99 ms | n |"
echo "|---|---|---|---|"
single "ORDER BY v <-> q LIMIT 10, GPU" "-c clustervec.gpu=require -c clustervec.probes=$probes" "\\set qid random(1, $nq)
SELECT id FROM items ORDER BY v <-> (SELECT v FROM queries WHERE qid = :qid) LIMIT 10;"
single "ORDER BY v <-> q LIMIT 10, CPU" "-c clustervec.gpu=off -c clustervec.probes=$probes" "\\set qid random(1, $nq)
SELECT id FROM items ORDER BY v <-> (SELECT v FROM queries WHERE qid = :qid) LIMIT 10;"
single "WHERE c = label ORDER BY v <-> q LIMIT 10 (one list)" "-c clustervec.probes=$probes" "\\set qid random(1, $nq)
SELECT id FROM items WHERE c = :qid % $clusters ORDER BY v <-> (SELECT v FROM queries WHERE qid = :qid) LIMIT 10;"
filtered_cpu_against_btree
single "cvsearch, one query, GPU" "-c clustervec.gpu=require" "\\set qid random(1, $nq)
SELECT count(*) FROM cvsearch('items_lat', ARRAY[(SELECT v FROM queries WHERE qid = :qid)], 10, $probes);"
