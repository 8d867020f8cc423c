#!/usr/bin/env bash
# test/citus/bench.sh: one node against a Citus coordinator and two workers
# on the same machine (issue 17's benchmark), with the PostgreSQL that has
# Citus and clustervec installed (README "Citus").  Run as root from the
# checkout:
#
#   CV_BENCH_PGBIN=ROOT/usr/lib/postgresql/15/bin bash test/citus/bench.sh ROWS DIMS CLUSTERS
#
# The same rows (bench/gpu_data.py) go into a plain table on the single node
# and into a table distributed by the cluster column over 2 shards, one per
# worker (the coordinator holds none).  Prints, for both: the load, CREATE
# INDEX (default lists, rows / 1000 per index: the same rows per list),
# cluster_health (on Citus: on the shards; and, for comparison, the
# coordinator computing alone through cluster_health_query), and 100
# single queries at equal probes (latency p50/p99 inside one session,
# recall@10 against cvsearch_exact on the single node).
# Every node's GPU worker opens CV_BENCH_LIBRARY (default clustervec_cuda_cpu,
# the CPU library; clustervec_cuda on a GPU host); CV_BENCH_DEVICES gives the
# CUDA device of the single node, the coordinator and the two workers
# (default 0,0,0,1: on a host with two GPUs each worker owns one).  Data and
# servers under CV_BENCH_DIR (default /var/tmp/citus/bench), ports CV_BENCH_PORT
# (default 5535) to CV_BENCH_PORT + 3.
set -uo pipefail
rows=${1:-200000}; dims=${2:-128}; clusters=${3:-200}
PGBIN=${CV_BENCH_PGBIN:-/usr/lib/postgresql/15/bin}
user=${CV_BENCH_USER:-postgres}
library=${CV_BENCH_LIBRARY:-clustervec_cuda_cpu}
IFS=, read -r dev_single dev_coord dev_w1 dev_w2 <<<"${CV_BENCH_DEVICES:-0,0,0,1}"
base=${CV_BENCH_DIR:-/var/tmp/citus/bench}
port0=${CV_BENCH_PORT:-5535}
p_single=$port0 p_coord=$((port0 + 1)) p_w1=$((port0 + 2)) p_w2=$((port0 + 3))
sock=$base/sock
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
as_user() { runuser -u "$user" -- "$@"; }
# q PORT ARGS...: psql on the node of that port
q() {
	local port=$1
	shift
	"$PGBIN/psql" -h "$sock" -p "$port" -U "$user" -d postgres -XAtq -v ON_ERROR_STOP=1 "$@"
}

# start_node NAME PORT DEVICE PRELOAD: a fresh cluster, started
start_node() {
	local d=$base/$1
	rm -rf "$d" && as_user mkdir -p "$d"
	as_user "$PGBIN/initdb" -D "$d/data" -A trust -U "$user" >"$d.initdb.log" 2>&1 \
		|| { cat "$d.initdb.log"; return 1; }
	as_user tee -a "$d/data/postgresql.conf" >/dev/null <<-EOF
	port = $2
	unix_socket_directories = '$sock'
	listen_addresses = '127.0.0.1'
	shared_preload_libraries = '$4'
	clustervec.gpu_library = '\$libdir/$library'
	clustervec.gpu_device = $3
	max_worker_processes = 32
	max_parallel_workers_per_gather = 0
	maintenance_work_mem = 1GB
	fsync = off
	synchronous_commit = off
	citus.node_conninfo = 'sslmode=disable'
	citus.shard_count = 2
	EOF
	as_user "$PGBIN/pg_ctl" -D "$d/data" -l "$d.log" -w start >/dev/null \
		|| { tail -30 "$d.log"; return 1; }
	started+=("$1")
}

# Stops the nodes this run started, however it ends.
stop_nodes() {
	local n
	for n in "${started[@]}"; do
		as_user "$PGBIN/pg_ctl" -D "$base/$n/data" -m fast -w stop >/dev/null
	done
	started=()
}
started=()
trap stop_nodes EXIT

# load PORT: the rows, 4 binary COPYs in parallel
load() {
	local t p
	t=$(now)
	for p in 0 1 2 3; do q "$1" -c "COPY items FROM '$base/data.$p' WITH (FORMAT binary)" & done
	wait
	echo "load: $(since "$t") s"
	q "$1" -c "VACUUM ANALYZE items"
}

# timed PORT WHAT SQL
timed() {
	local t
	t=$(now)
	q "$1" -c "$3" >/dev/null || echo "FAILED: $2"
	echo "$2: $(since "$t") s"
}

# queries PORT PROBES: 100 single queries in one session, their latency
# percentiles and recall@10 (against the single node's exact answers)
queries() {
	local file=$base/queries.sql out=$base/res.$1.$2 qid=0 v
	{
		echo "BEGIN; SET LOCAL citus.propagate_set_commands = 'local'; SET LOCAL clustervec.probes = $2;"
		printf '%s\n' '\timing on'
		head -n 100 "$base/data.queries" | while read -r v; do
			qid=$((qid + 1))
			echo "SELECT $qid, id FROM items ORDER BY v <-> '$v' LIMIT 10;"
		done
		printf '%s\n' '\timing off' 'COMMIT;'
	} >"$file"
	q "$1" -f "$file" >"$out.raw" || { echo "FAILED: queries on $1"; return 1; }
	grep '|' "$out.raw" >"$out"
	grep -oE '^Time: [0-9.]+' "$out.raw" | awk '{print $2}' | sort -n \
		| awk -v what="probes $2" '{a[NR]=$1} END {printf "%s: latency p50 %.2f ms, p99 %.2f ms (n %d)", what, a[int(NR*0.5)], a[int(NR*0.99)], NR}'
	q $p_single -c "SET client_min_messages = warning; CREATE TABLE IF NOT EXISTS res (qid int, id int8); TRUNCATE res" \
		-c "\\copy res FROM '$out' WITH (DELIMITER '|')"
	q $p_single -c "SELECT ', recall@10 ' || round(count(*)::numeric / 1000, 4) FROM res JOIN truth USING (qid, id)"
}

rm -rf "$base" && mkdir -p "$base" && chown "$user" "$base" && as_user mkdir -p "$sock"
echo "== data: $rows x $dims, $clusters clusters; GPU library $library"
as_user /usr/bin/python3 bench/gpu_data.py "$rows" "$dims" "$clusters" 4 "$base/data" || exit 1
table="CREATE TABLE items (id int8, c int4, v cvec($dims)); ALTER TABLE items ALTER v SET STORAGE EXTERNAL;"

echo "== one node (device $dev_single)"
start_node single $p_single "$dev_single" clustervec || exit 1
q $p_single -c "CREATE EXTENSION clustervec" -c "$table"
load $p_single
timed $p_single "CREATE INDEX" "CREATE INDEX items_ivf ON items USING cvivf (v) WITH (seed = 7)"
timed $p_single "cluster_health" "CREATE TABLE h AS SELECT * FROM cluster_health('items', 'c', 'v', progress => false)"
timed $p_single "cluster_health on the CPU (clustervec.gpu = off, as the shards run it)" \
	"SET clustervec.gpu = off; CREATE TABLE hc AS SELECT * FROM cluster_health('items', 'c', 'v', progress => false)"
q $p_single -c "SELECT 'GPU worker (' || backend || '): index builds ' || index_builds || ', health runs ' || health_runs FROM clustervec_gpu_info()"
q $p_single -c "CREATE TABLE queries AS SELECT row_number() OVER () AS qid, v::cvec($dims) AS v FROM (SELECT unnest(string_to_array(pg_read_file('$base/data.queries'), E'\n')) v) s WHERE v <> ''" \
	-c "CREATE TABLE truth AS SELECT e.query_no AS qid, i.id FROM cvsearch_exact('items', 'v', (SELECT array_agg(v ORDER BY qid) FROM queries WHERE qid <= 100), 10) e JOIN items i ON i.ctid = e.tid"
for probes in 1 4 16; do queries $p_single $probes; done

echo "== Citus: coordinator (device $dev_coord, no rows) + 2 workers (devices $dev_w1 and $dev_w2), 2 shards"
start_node coord $p_coord "$dev_coord" 'citus, clustervec' && start_node w1 $p_w1 "$dev_w1" 'citus, clustervec' \
	&& start_node w2 $p_w2 "$dev_w2" 'citus, clustervec' || exit 1
for p in $p_w1 $p_w2; do q $p -c "CREATE EXTENSION citus" -c "CREATE EXTENSION clustervec"; done
q $p_coord -c "CREATE EXTENSION citus" -c "CREATE EXTENSION clustervec" \
	-c "SELECT citus_set_coordinator_host('127.0.0.1', $p_coord)" \
	-c "SELECT citus_add_node('127.0.0.1', $p_w1)" -c "SELECT citus_add_node('127.0.0.1', $p_w2)" \
	-c "$table" -c "SELECT create_distributed_table('items', 'c')" >/dev/null
load $p_coord
q $p_coord -c "SELECT 'shard rows: ' || string_agg(result, ', ') FROM run_command_on_shards('items', 'SELECT count(*) FROM %s')"
timed $p_coord "CREATE INDEX" "CREATE INDEX items_ivf ON items USING cvivf (v) WITH (seed = 7)"
timed $p_coord "cluster_health" "CREATE TABLE h AS SELECT * FROM cluster_health('items', 'c', 'v', progress => false)"
timed $p_coord "cluster_health_query (every row to the coordinator, as before the shard path)" \
	"CREATE TABLE hq AS SELECT * FROM cluster_health_query('SELECT c, v FROM items', progress => false)"
for p in $p_coord $p_w1 $p_w2; do
	q $p -c "SELECT 'port $p GPU worker (' || backend || '): index builds ' || index_builds || ', health runs ' || health_runs FROM clustervec_gpu_info()"
done
for probes in 1 4 16; do queries $p_coord $probes; done
stop_nodes
