#!/usr/bin/env bash
# bench/gpu_serving.sh: the GPU worker under many sessions, on the GPU
# machine after `. .gpu/device-env.sh`, `pgmake CUDA=1 install` and
# `pg_start "shared_preload_libraries = 'clustervec'" "max_connections = 200"`:
#
#   bash bench/gpu_serving.sh ROWS DIMS CLUSTERS LISTS PROBES
#
# Loads ROWS x DIMS clustered vectors (bench/gpu_data.py, 4 parallel binary
# COPYs), builds the cvivf index on the GPU and mirrors it, then runs
# pgbench (prepared) with 1, 4, 16 and 64 clients of `ORDER BY v <-> q LIMIT 10`
# (probes PROBES) on the GPU path (clustervec.gpu = require) and on the CPU
# path (off) side by side, and prints one table: queries/s, p50 and p99
# latency, and for the GPU the worker's launches, requests per launch and
# mean queue wait over that run.  Then the same single-client search on the
# GPU path under auto while another session runs cluster_health over all
# rows (HEALTH_SECONDS, default 20, covering the whole run): p50/p99 and
# how many searches went to the CPU (gpu_max_wait).
set -uo pipefail
rows=${1:-1000000}; dims=${2:-1024}; clusters=${3:-1000}; lists=${4:-4096}; probes=${5:-8}
seconds=${PGBENCH_SECONDS:-5}
declare -F pg_psql >/dev/null || . .gpu/device-env.sh
q() { pg_psql -X -q -At "$@"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

t=$(now)
"${PYTHON:-python3}" bench/gpu_data.py "$rows" "$dims" "$clusters" 4 /tmp/cvserve || exit 1
chmod a+r /tmp/cvserve.*
q -c "CREATE TABLE items (id int8, c int4, v cvec($dims)); ALTER TABLE items ALTER v SET STORAGE EXTERNAL"
for p in 0 1 2 3; do q -c "COPY items FROM '/tmp/cvserve.$p' WITH (FORMAT binary)" & done; wait
q -c "VACUUM ANALYZE items"
q -c "CREATE TABLE queries AS SELECT row_number() OVER () AS qid, v::cvec($dims) AS v FROM (SELECT unnest(string_to_array(pg_read_file('/tmp/cvserve.queries'), E'\n')) v) s WHERE v <> ''"
q -c "CREATE UNIQUE INDEX ON queries (qid)"
q -c "VACUUM ANALYZE queries"
q -c "SET clustervec.gpu = require; SET maintenance_work_mem = '8GB'; CREATE INDEX items_ivf ON items USING cvivf (v cvec_l2_ops) WITH (lists = $lists)"
q -c "SELECT clustervec_gpu_warm('items_ivf')" >/dev/null
echo "data, index and mirror: $rows x $dims, $lists lists: $(since "$t") s"

# the counters the worker keeps, as "launches requests wait_us busy"
counters() {
	q -c "SELECT search_launches || ' ' || search_requests || ' ' ||
	             round(coalesce(mean_queue_wait_ms, 0) * search_requests * 1000) || ' ' || busy_fallbacks
	      FROM clustervec_gpu_info()"
}

# pgbench of one search, N clients, for `seconds`: "tps p50_us p99_us".  One
# prepared statement per transaction; the settings come with the connection.
run_pgbench() {
	local clients=$1 mode=$2
	rm -f /tmp/pgb*
	printf '%s\n' '\set qid random(1, 1000)' \
		'SELECT id FROM items ORDER BY v <-> (SELECT v FROM queries WHERE qid = :qid) LIMIT 10;' \
		> /tmp/one.sql
	local jobs=$(( clients < 16 ? clients : 16 ))
	local tps
	tps=$(PGOPTIONS="-c clustervec.gpu=$mode -c clustervec.probes=$probes" \
		LD_LIBRARY_PATH=/opt/pglibs $PGBIN/pgbench -n -M prepared -c "$clients" -j "$jobs" \
		-T "$seconds" -f /tmp/one.sql --log --log-prefix=/tmp/pgb postgres 2>&1 |
		awk '/^tps/ {printf "%.0f", $3}')
	cat /tmp/pgb* | awk '{print $3}' | sort -n |
		awk -v tps="$tps" '{a[NR]=$1} END {printf "%s %d %d", tps, a[int(NR*0.5)], a[int(NR*0.99)]}'
}

echo
echo "| path | clients | queries/s | p50 ms | p99 ms | launches | requests per launch | mean queue wait ms |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for clients in 1 4 16 64; do
	for mode in require off; do
		read -r l0 r0 w0 b0 <<< "$(counters)"
		read -r tps p50 p99 <<< "$(run_pgbench "$clients" "$mode")"
		read -r l1 r1 w1 b1 <<< "$(counters)"
		if [ "$mode" = require ]; then
			extra=$(awk -v l=$((l1 - l0)) -v r=$((r1 - r0)) -v w=$((w1 - w0)) \
				'BEGIN { printf "%d | %.2f | %.3f", l, (l ? r / l : 0), (r ? w / r / 1000 : 0) }')
			path=GPU
		else
			extra="- | - | -"
			path=CPU
		fi
		awk -v p="$path" -v c="$clients" -v t="$tps" -v a="$p50" -v b="$p99" -v e="$extra" \
			'BEGIN { printf "| %s | %d | %d | %.2f | %.2f | %s |\n", p, c, t, a / 1000, b / 1000, e }'
	done
done

echo
printf '%s\n' 'SELECT clustervec_gpu_ping(0);' > /tmp/ping.sql
rm -f /tmp/pgb*
LD_LIBRARY_PATH=/opt/pglibs $PGBIN/pgbench -n -M prepared -c 1 -T "$seconds" -f /tmp/ping.sql \
	--log --log-prefix=/tmp/pgb postgres >/dev/null 2>&1
cat /tmp/pgb* | awk '{print $3}' | sort -n |
	awk '{a[NR]=$1} END {printf "an empty round trip through the worker (clustervec_gpu_ping(0)), 1 client: p50 %.3f ms, p99 %.3f ms\n", a[int(NR*0.5)] / 1000, a[int(NR*0.99)] / 1000}'

echo
echo "== one client on the GPU path (auto) while another session runs cluster_health over all rows"
q -c "SET clustervec.gpu = require; SET clustervec.health_memory = '4GB'; SELECT count(*) FROM cluster_health('items', 'c', 'v', progress => false)" >/tmp/health.out 2>&1 &
health=$!
sleep 2
read -r l0 r0 w0 b0 <<< "$(counters)"
# long enough to cover cluster_health whole, its worker passes included
read -r tps p50 p99 <<< "$(PGBENCH_SECONDS=${HEALTH_SECONDS:-20} run_pgbench 1 auto)"
read -r l1 r1 w1 b1 <<< "$(counters)"
running=$(kill -0 $health 2>/dev/null && echo "still running" || echo "finished during the run")
echo "queries/s $tps, p50 $(awk -v a=$p50 'BEGIN {printf "%.2f", a / 1000}') ms, p99 $(awk -v a=$p99 'BEGIN {printf "%.2f", a / 1000}') ms; searches sent to the CPU by gpu_max_wait: $((b1 - b0)); GPU launches $((l1 - l0)); cluster_health $running"
wait $health
