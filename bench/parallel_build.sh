#!/usr/bin/env bash
# parallel_build.sh: cvivf CREATE INDEX time with 0, 1 and 2 parallel
# maintenance workers, on synthetic uniform rows made in SQL
# (generate_series and random(), setseed first: the same rows every run).
#
# Runs against a server that has clustervec installed, through psql and the
# usual PGHOST / PGPORT / PGUSER / PGDATABASE; it must run on the server's
# machine: the CPU time of the build comes from /proc, the leader backend's
# own (utime + stime) and its workers' (the postmaster's reaped children,
# cutime + cstime; keep autovacuum and other sessions quiet meanwhile).
#
#   CV_BENCH_SETS="200000x128 200000x128x1000 50000x1024 50000x1024x250"
#                                          rows x dimensions [x lists] per build
#                                          (lists: the automatic rows / 1000)
#   CV_BENCH_WORKERS="0 1 2"               max_parallel_maintenance_workers
#   CV_BENCH_REPEAT=3                      builds per setting (median shown)
#   CV_BENCH_KEEP=1                        keep the tables for the next run
#
# Prints one markdown table: the wall time of CREATE INDEX, the time of its
# "assigning tuples" phase (the parallel one; pg_stat_progress_create_index
# polled every 50 ms), and the CPU of the leader and of its workers.  The
# tables get parallel_workers = 2 so the planner grants the workers asked
# for; maintenance_work_mem is 1GB.
set -euo pipefail

SETS=${CV_BENCH_SETS:-200000x128 200000x128x1000 50000x1024 50000x1024x250}
WORKERS=${CV_BENCH_WORKERS:-0 1 2}
REPEAT=${CV_BENCH_REPEAT:-3}
TICK=$(getconf CLK_TCK)

psql_q() { psql -X -v ON_ERROR_STOP=1 -qAt "$@"; }

# --cpu: "CPU <ticks of backend $CV_PID> <reaped children's ticks of its postmaster>"
if [ "${1:-}" = --cpu ]; then
	read -r -a stat <"/proc/${CV_PID}/stat"
	read -r -a parent <"/proc/${stat[3]}/stat"
	echo "CPU $((stat[13] + stat[14])) $((parent[15] + parent[16]))"
	exit 0
fi
SELF=$(readlink -f "${BASH_SOURCE[0]}")

# make_table TABLE ROWS DIMS: the rows, unless CV_BENCH_KEEP left them there
make_table() {
	local table=$1 rows=$2 dims=$3
	if [ -n "${CV_BENCH_KEEP:-}" ] && [ "$(psql_q -c "SELECT to_regclass('$table') IS NOT NULL")" = t ]; then
		return
	fi
	psql_q >/dev/null <<-SQL
		SET client_min_messages = warning;
		CREATE EXTENSION IF NOT EXISTS clustervec;
		DROP TABLE IF EXISTS $table;
		CREATE TABLE $table (id int, v cvec($dims)) WITH (parallel_workers = 2, autovacuum_enabled = off);
		SELECT setseed(0.5);
		INSERT INTO $table SELECT i, (SELECT array_agg(random()::real) FROM generate_series(1, $dims) WHERE i > 0)::cvec
			FROM generate_series(1, $rows) i;
		VACUUM ANALYZE $table;
	SQL
}

# poll_phases PID_FILE PSQL_PID OUT: the build's phase every 50 ms, with a
# timestamp, while its psql runs; through one session, so that no polling
# backend exits during the build and counts as a worker's CPU
poll_phases() {
	local pid_file=$1 psql_pid=$2 out=$3 pid="" line
	coproc POLL { psql -X -qAt 2>/dev/null; }
	while kill -0 "$psql_pid" 2>/dev/null; do
		[ -n "$pid" ] || pid=$(cat "$pid_file" 2>/dev/null || true)
		if [ -n "$pid" ]; then
			echo "SELECT extract(epoch FROM clock_timestamp()) || ' ' || coalesce((SELECT phase
				FROM pg_stat_progress_create_index WHERE pid = $pid), '-');" >&"${POLL[1]}"
			read -r line <&"${POLL[0]}"
			echo "$line" >>"$out"
		fi
		sleep 0.05
	done
	echo '\q' >&"${POLL[1]}"
	wait "$POLL_PID" 2>/dev/null || true
}

# build_once TABLE WORKERS LISTS:
# "wall_ms leader_ticks worker_ticks launched assigning_s"
build_once() {
	local table=$1 workers=$2 lists=$3 dir psql_pid
	dir=$(mktemp -d)
	: >"$dir/phases"
	# the --cpu lines before and after: the workers have exited (and the
	# postmaster reaped them, hence the pause) when CREATE INDEX returns
	psql -X -v ON_ERROR_STOP=1 -At >"$dir/out" 2>&1 <<-SQL &
		DROP INDEX IF EXISTS ${table}_idx;
		CHECKPOINT;
		SET maintenance_work_mem = '1GB';
		SET max_parallel_maintenance_workers = $workers;
		SELECT pg_backend_pid() AS pid \gset
		\setenv CV_PID :pid
		\! bash $SELF --cpu; echo "\$CV_PID" > $dir/pid
		SET client_min_messages = debug1;
		\timing on
		CREATE INDEX ${table}_idx ON $table USING cvivf (v) WITH (seed = 1${lists:+, lists = $lists});
		\timing off
		\! sleep 0.3; bash $SELF --cpu
	SQL
	psql_pid=$!
	poll_phases "$dir/pid" "$psql_pid" "$dir/phases"
	wait "$psql_pid"
	# the assigning phase: from its first sample to the first sample after it
	awk '
		/^CPU / { n++; leader[n] = $2; children[n] = $3 }
		/^Time: / { ms = $2 }
		/parallel workers launched of/ { for (i = 1; i <= NF; i++) if ($i == "launched") launched = $(i - 3) }
		FNR == 1 && FILENAME ~ /phases$/ { phases = 1 }
		phases && /assigning tuples/ && !a0 { a0 = $1 }
		phases && a0 && !a1 && !/assigning tuples/ { a1 = $1 }
		END { printf "%s %d %d %d %.2f\n", ms, leader[2] - leader[1], children[2] - children[1],
			launched + 0, (a1 > a0 ? a1 - a0 : 0) }' "$dir/out" "$dir/phases"
	rm -rf "$dir"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "Load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores"
echo
echo "| rows x dims | lists | max_parallel_maintenance_workers | launched | wall s (median of $REPEAT) | speedup | assigning phase s | its speedup | leader CPU s | workers' CPU s | total CPU s |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for set in $SETS; do
	IFS=x read -r rows dims lists <<<"$set"
	table="pb_${rows}_${dims}"
	make_table "$table" "$rows" "$dims"
	base=""
	abase=""
	for w in $WORKERS; do
		runs=()
		for _ in $(seq 1 "$REPEAT"); do
			runs+=("$(build_once "$table" "$w" "${lists:-}")")
		done
		wall=$(printf '%s\n' "${runs[@]}" | awk '{print $1}' | median)
		assign=$(printf '%s\n' "${runs[@]}" | awk '{print $5}' | median)
		# CPU and launched workers of the run with the median wall time
		read -r _ lt wt launched _ <<<"$(printf '%s\n' "${runs[@]}" | awk -v m="$wall" '$1 == m' | head -n 1)"
		[ -n "$base" ] || base=$wall
		[ -n "$abase" ] || abase=$assign
		awk -v set="$rows x $dims" -v lists="${lists:-auto}" -v w="$w" -v l="$launched" -v ms="$wall" \
			-v b="$base" -v a="$assign" -v ab="$abase" -v lt="$lt" -v wt="$wt" -v tick="$TICK" 'BEGIN {
			printf "| %s | %s | %d | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
				set, lists, w, l, ms / 1000, b / ms, a, (a > 0 ? ab / a : 0), lt / tick, wt / tick,
				(lt + wt) / tick }'
	done
	[ -n "${CV_BENCH_KEEP:-}" ] || psql_q -c "DROP TABLE $table"
done
echo
echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
