#!/usr/bin/env bash
# bench/gpu_order_latency.sh: one session's `ORDER BY v <-> q LIMIT 10` on
# the GPU path against the same search through cvsearch, with the first
# answer's width (CLUSTERVEC_GPU_FIRST_WIDTH, the rows an index scan asks
# the worker for first) varied by restarting the server.  On the GPU machine
# after `. .gpu/device-env.sh`, `pgmake CUDA=1 install` and
# `pg_start "shared_preload_libraries = 'clustervec'"` (test/gpu/all.sh):
#
#   bash bench/gpu_order_latency.sh ROWS DIMS CLUSTERS LISTS PROBES
set -uo pipefail
rows=${1:-1000000}; dims=${2:-1024}; clusters=${3:-1000}; lists=${4:-4096}; probes=${5:-8}
seconds=${PGBENCH_SECONDS:-5}
declare -F pg_psql >/dev/null || . .gpu/device-env.sh
q() { pg_psql -X -q -At "$@"; }

"${PYTHON:-python3}" bench/gpu_data.py "$rows" "$dims" "$clusters" 4 /tmp/cvlat || exit 1
chmod a+r /tmp/cvlat.*
q -c "CREATE TABLE items (id int8, c int4, v cvec($dims)); ALTER TABLE items ALTER v SET STORAGE EXTERNAL"
for p in 0 1 2 3; do q -c "COPY items FROM '/tmp/cvlat.$p' WITH (FORMAT binary)" & done; wait
q -c "VACUUM ANALYZE items"
q -c "CREATE TABLE queries AS SELECT row_number() OVER () AS qid, v::cvec($dims) AS v FROM (SELECT unnest(string_to_array(pg_read_file('/tmp/cvlat.queries'), E'\n')) v) s WHERE v <> ''"
q -c "CREATE UNIQUE INDEX ON queries (qid)"
q -c "VACUUM ANALYZE queries"
q -c "SET clustervec.gpu = require; SET maintenance_work_mem = '8GB'; CREATE INDEX items_ivf ON items USING cvivf (v cvec_l2_ops) WITH (lists = $lists)"

restart_with() {
	su pg -c "LD_LIBRARY_PATH=$PGLIBS CLUSTERVEC_GPU_FIRST_WIDTH=$1 $PGBIN/pg_ctl -D /tmp/pgdata -o '-p $PGPORT -k /tmp/pgsock' -l /tmp/pgdata.log -w restart" >/dev/null
	sleep 1
	q -c "SELECT clustervec_gpu_warm('items_ivf')" >/dev/null
}

# pgbench, one client, one prepared statement: "tps p50_us p99_us"
latency() {
	rm -f /tmp/pgb*
	printf '%s\n' '\set qid random(1, 1000)' "$1" > /tmp/one.sql
	local tps
	tps=$(PGOPTIONS="-c clustervec.gpu=require -c clustervec.probes=$probes" \
		LD_LIBRARY_PATH=$PGLIBS $PGBIN/pgbench -n -M prepared -c 1 -T "$seconds" -f /tmp/one.sql \
		--log --log-prefix=/tmp/pgb postgres 2>&1 | awk '/^tps/ {printf "%.0f", $3}')
	cat /tmp/pgb* | awk '{print $3}' | sort -n |
		awk -v tps="$tps" '{v[NR] = $1} END {printf "%s %d %d", tps, v[int(NR * 0.5) + 1], v[int(NR * 0.99) + 1]}'
}

order='SELECT id FROM items ORDER BY v <-> (SELECT v FROM queries WHERE qid = :qid) LIMIT 10;'
search="SELECT * FROM cvsearch('items_ivf', ARRAY[(SELECT v FROM queries WHERE qid = :qid)], 10, $probes);"
echo "| first width | ORDER BY q/s | p50 ms | p99 ms | cvsearch q/s | p50 ms | p99 ms |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
for width in 64 16 10; do
	restart_with "$width"
	latency "$order" >/dev/null	# warm-up
	read -r ot op50 op99 <<<"$(latency "$order")"
	read -r st sp50 sp99 <<<"$(latency "$search")"
	awk -v w="$width" -v ot="$ot" -v a="$op50" -v b="$op99" -v st="$st" -v c="$sp50" -v d="$sp99" \
		'BEGIN { printf "| %d | %s | %.3f | %.3f | %s | %.3f | %.3f |\n", w, ot, a / 1000, b / 1000, st, c / 1000, d / 1000 }'
done
q -c "EXPLAIN (ANALYZE, COSTS OFF) SELECT id FROM items ORDER BY v <-> (SELECT v FROM queries WHERE qid = 7) LIMIT 10"
