#!/usr/bin/env bash
# bench/retrain.sh: cvivf_retrain against REINDEX INDEX CONCURRENTLY on an
# index whose data moved after its build, with queries running throughout:
#
#   bash bench/retrain.sh ROWS DIMS CLUSTERS LISTS [PROBES]
#
# against the server the PG* variables name (psql), or on the GPU machine
# after `. .gpu/device-env.sh` and `pg_start` (pg_psql).  bench/gpu_data.py
# writes ROWS x DIMS in CLUSTERS clusters; the index is built over the
# clusters of the first half (c < CLUSTERS / 2), then the other half's rows
# arrive through inserts: new clusters the old centroids do not know.
# Printed: recall@10 at PROBES (cvivf_recall, 200 sampled rows) before and
# after each operation; each operation's time, the peak of the table's
# index size above its size before (sampled every 0.2 s), and the latency
# of the queries two pgbench clients ran during it (ORDER BY v <-> q LIMIT
# 10, PROBES lists, one of 1,000 query points each), against the same
# clients' latency before.  REINDEX runs second, on the rows the retrain
# saw.  CLUSTERVEC_GPU (off, auto, require) sets clustervec.gpu for both.
set -uo pipefail
rows=${1:-1000000}; dims=${2:-128}; clusters=${3:-1000}; lists=${4:-1000}
probes=${5:-8}
gpu=${CLUSTERVEC_GPU:-auto}
work=${CV_BENCH_DIR:-/tmp/cvretrain}
# on the GPU machine the bundle's PostgreSQL is not on PATH: device-env.sh defines pg_psql
if ! command -v psql >/dev/null && [ -f .gpu/device-env.sh ]; then . .gpu/device-env.sh; fi
if declare -F pg_psql >/dev/null; then
  q() { pg_psql -X -q -At "$@"; }
  bench_cmd() { LD_LIBRARY_PATH=/opt/pglibs "$PGBIN/pgbench" "$@"; }
else
  q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
  bench_cmd() { pgbench "$@"; }
fi
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
mkdir -p "$work" && chmod 777 "$work" && rm -f "$work/pgbench.err"

echo "== data: $rows x $dims in $clusters clusters; index of $lists lists built on half the clusters"
"${PYTHON:-python3}" bench/gpu_data.py "$rows" "$dims" "$clusters" 4 "$work/data" || exit 1
chmod a+r "$work"/data.*
q -c "DROP TABLE IF EXISTS items, staging, queries" 2>/dev/null
q -c "CREATE UNLOGGED TABLE staging (id int8, c int4, v cvec($dims))"
for p in 0 1 2 3; do q -c "COPY staging FROM '$work/data.$p' WITH (FORMAT binary)" & done; wait
q -c "CREATE TABLE queries AS SELECT row_number() OVER () AS qid, v::cvec($dims) AS v
      FROM (SELECT unnest(string_to_array(pg_read_file('$work/data.queries'), E'\n')) v) s WHERE v <> ''"
q -c "CREATE TABLE items (id int8 PRIMARY KEY, c int4, v cvec($dims));
      ALTER TABLE items ALTER v SET STORAGE EXTERNAL;
      INSERT INTO items SELECT * FROM staging WHERE c < $clusters / 2"
q -c "VACUUM ANALYZE items"
t=$(now)
q -c "SET clustervec.gpu = $gpu; SET maintenance_work_mem = '4GB';
      CREATE INDEX items_idx ON items USING cvivf (v) WITH (lists = $lists)"
echo "build on the first half: $(since "$t") s"
t=$(now)
for p in 0 1 2 3 4 5 6 7; do
  q -c "INSERT INTO items SELECT * FROM staging WHERE c >= $clusters / 2 AND id % 8 = $p" &
done; wait
q -c "ANALYZE items"
echo "inserting the second half through the index (8 sessions): $(since "$t") s"
q -c "DROP TABLE staging"

recall() {
  q -c "SELECT round(recall::numeric, 4) FROM cvivf_recall('items_idx', 200, 10, $probes)"
}
index_size() { q -c "SELECT pg_indexes_size('items')"; }
# builds the GPU worker served so far (0 without a worker)
gpu_builds() { q -c "SELECT coalesce(index_builds, 0) FROM clustervec_gpu_info()" 2>/dev/null || echo 0; }

cat > "$work/query.sql" <<EOF
\set q random(1, 1000)
SET clustervec.probes = $probes;
SELECT id FROM items ORDER BY v <-> (SELECT v FROM queries WHERE qid = :q) LIMIT 10;
EOF
chmod a+r "$work/query.sql"

# latency percentiles (ms) of the pgbench log lines between two epochs
latency() {
  cat "$work"/log.* 2>/dev/null | awk -v a="$1" -v b="$2" \
    '$5 + $6 / 1e6 >= a && $5 + $6 / 1e6 <= b { print $3 / 1000 }' | sort -n |
    awk 'function at(p,  i) { i = int(NR * p) + 1; if (i > NR) i = NR; return x[i] }
      { x[NR] = $1 }
      END { if (NR == 0) { print "-"; exit }
            printf "%.2f / %.2f\n", at(0.5), at(0.99) }'
}

# run NAME SQL: the operation under two query clients; one table row
run() {
  local name=$1 sql=$2 before size peak t0 t1 t2 sampler
  before=$(index_size)
  local builds0 builds1
  builds0=$(gpu_builds)
  rm -f "$work"/log.* "$work/stop"
  # two-second runs until told to stop, so every run's log is complete
  (i=0; while [ ! -e "$work/stop" ]; do
     bench_cmd -n -c 2 -j 2 -T 2 -l --log-prefix="$work/log.$((i++))" \
       -f "$work/query.sql" "${PGDATABASE:-postgres}" >/dev/null 2>>"$work/pgbench.err"
   done) &
  local bench=$!
  sleep 5
  t0=$(now)
  (while :; do index_size; sleep 0.2; done) > "$work/sizes" &
  sampler=$!
  t1=$(now)
  PGOPTIONS="-c clustervec.gpu=$gpu -c maintenance_work_mem=4GB" q -c "$sql" >/dev/null
  t2=$(now)
  kill $sampler 2>/dev/null; wait $sampler 2>/dev/null
  sleep 2
  touch "$work/stop"; wait $bench 2>/dev/null
  builds1=$(gpu_builds)
  peak=$(sort -n "$work/sizes" | tail -1)
  size=$(index_size)
  local base during
  base=$(latency "$(awk -v a="$t0" 'BEGIN { print a - 5 }')" "$t0")
  during=$(latency "$t1" "$t2")
  printf '| %s | %s | %s | %.0f | %.0f | %s | %s | %s |\n' "$name" \
    "$( [ "$builds1" -gt "$builds0" ] && echo GPU || echo CPU )" \
    "$(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.2f", b - a }')" \
    "$(awk -v p="$peak" -v b="$before" 'BEGIN { print (p - b) / 1048576 }')" \
    "$(awk -v s="$size" 'BEGIN { print s / 1048576 }')" \
    "$base" "$during" "$(recall)"
}

echo "== drifted: recall@10 at probes $probes before any operation: $(recall)"
q -c "SELECT recommendation, reason FROM cvivf_health('items_idx')"
echo
echo "| operation | k-means | seconds | peak extra index MB | index MB after | query p50 / p99 ms before | during | recall@10 after |"
echo "|---|---|---|---|---|---|---|---|"
run "cvivf_retrain" "SELECT * FROM cvivf_retrain('items_idx')"
run "REINDEX INDEX CONCURRENTLY" "REINDEX INDEX CONCURRENTLY items_idx"
if [ -s "$work/pgbench.err" ]; then echo "pgbench stderr:"; tail -3 "$work/pgbench.err"; fi
