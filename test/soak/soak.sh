#!/usr/bin/env bash
#
# test/soak/soak.sh: the clustervec soak test (not part of CI).
#
#   bash test/soak/soak.sh [DURATION]     DURATION: seconds, or 90s / 30m / 2h (default 1h)
#   bash test/soak/soak.sh --short        a 60-second smoke run
#
# Starts a private PostgreSQL with clustervec preloaded (the GPU worker opens
# $libdir/$CV_GPU_LIBRARY: clustervec_cuda_cpu, the CPU shim, by default;
# CV_GPU_LIBRARY=clustervec_cuda on the GPU machine), then runs
# test/soak/soak.py: 16 clients inserting, deleting, searching through a
# cvivf index (clustervec.gpu = auto), vacuuming, reindexing concurrently and
# calling cluster_health, while the GPU worker is SIGKILLed at random
# intervals.  It prints a table and exits 1 on lost rows, wrong answers,
# unexpected errors, hung clients or crashes other than the kills.
#
# It uses the clustervec already installed for $PG_CONFIG (default
# /usr/lib/postgresql/15/bin/pg_config): `make install` first.  Run as root,
# the server and the driver run as the `postgres` user (or `pg`, the GPU
# machine's); otherwise as yourself.
#
# On the GPU machine (../shared/gpu/README.md), with psycopg2-binary's cp312
# wheel carried in .whl/ (the device tool's README says how):
#   . .gpu/device-env.sh && pgmake && pgmake install
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#   PYTHONPATH=/tmp/site CV_GPU_LIBRARY=clustervec_cuda \
#     CV_SOAK_PYTHON=$(command -v python3) bash test/soak/soak.sh 1h
#
# Knobs (environment):
#   CV_GPU_LIBRARY     library the worker opens (default clustervec_cuda_cpu)
#   PG_CONFIG          the PostgreSQL 15 whose binaries and clustervec to use
#   CV_SOAK_WORK       work folder (default /var/tmp/clustervec-soak): data,
#                      server.log, soak.log (the run), details.log, report.txt
#   CV_SOAK_PORT       port (default 5492); the socket is in the work folder
#   CV_SOAK_CLIENTS    clients (default 16)
#   CV_SOAK_ROWS, CV_SOAK_DIMS   table size (default 20000 x 64)
#   CV_SOAK_KILL_MIN, CV_SOAK_KILL_MAX   seconds between kills (default 5, 15)
#   CV_SOAK_SEED       repeat a run's data and choices
#   CV_SOAK_FSYNC      fsync setting (default off: a kill resets the server,
#                      the OS keeps its page cache; commits stay synchronous)
#   CV_SOAK_USER       OS user for the server when run as root
#   CV_SOAK_PGLIBS     LD_LIBRARY_PATH for PostgreSQL's programs only (default
#                      /opt/pglibs where it exists: the GPU machine's bundle)
#   CV_SOAK_PYTHON     Python with psycopg2 and numpy (default /usr/bin/python3)
#   CV_SOAK_KEEP=1     leave the server running at the end
set -euo pipefail

usage() { sed -n '5,6p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

seconds_of() {
	case "$1" in
		*h) echo $(( ${1%h} * 3600 )) ;;
		*m) echo $(( ${1%m} * 60 )) ;;
		*s) echo "${1%s}" ;;
		*) echo "$1" ;;
	esac
}

duration=3600
case "${1:-}" in
	"") ;;
	--short) duration=60 ;;
	-h|--help) usage ;;
	*[0-9]|*[0-9][smh]) duration=$(seconds_of "$1") ;;
	*) usage ;;
esac
[ "$duration" -ge 10 ] 2>/dev/null || { echo "soak: DURATION must be at least 10 seconds" >&2; exit 2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
[ -x "$PG_CONFIG" ] || { echo "soak: no pg_config at $PG_CONFIG (set PG_CONFIG)" >&2; exit 2; }
pg_bin=$("$PG_CONFIG" --bindir)
pkglib=$("$PG_CONFIG" --pkglibdir)
sharedir=$("$PG_CONFIG" --sharedir)
library=${CV_GPU_LIBRARY:-clustervec_cuda_cpu}
for f in "$pkglib/clustervec.so" "$pkglib/$library.so" "$sharedir/extension/clustervec.control"; do
	[ -f "$f" ] || { echo "soak: $f is missing: make install first (PG_CONFIG=$PG_CONFIG)" >&2; exit 2; }
done
work=${CV_SOAK_WORK:-/var/tmp/clustervec-soak}
port=${CV_SOAK_PORT:-5492}
python=${CV_SOAK_PYTHON:-/usr/bin/python3}
pglibs=${CV_SOAK_PGLIBS:-}
[ -z "$pglibs" ] && [ -d /opt/pglibs ] && pglibs=/opt/pglibs

if [ "$(id -u)" -eq 0 ]; then
	user=${CV_SOAK_USER:-}
	if [ -z "$user" ]; then
		if id postgres >/dev/null 2>&1; then user=postgres; elif id pg >/dev/null 2>&1; then user=pg; fi
	fi
	[ -n "$user" ] || { echo "soak: no postgres (or pg) user to run the server as (set CV_SOAK_USER)" >&2; exit 2; }
else
	user=$(id -un)
fi
home=$(getent passwd "$user" | cut -d: -f6)

# as_user [--pg] COMMAND...: as the server's OS user with a clean environment;
# --pg hands CV_SOAK_PGLIBS to PostgreSQL's programs (never to Python).
as_user() {
	local -a env_=(env -i "PATH=$pg_bin:/usr/local/bin:/usr/bin:/bin" "HOME=${home:-/tmp}" "USER=$user"
		"LANG=C.UTF-8" "PYTHONDONTWRITEBYTECODE=1")
	if [ "${1:-}" = --pg ]; then
		shift
		[ -n "$pglibs" ] && env_+=("LD_LIBRARY_PATH=$pglibs")
	elif [ -n "${PYTHONPATH:-}" ]; then
		env_+=("PYTHONPATH=$PYTHONPATH")
	fi
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u "$user" -- "${env_[@]}" "$@"
	else
		"${env_[@]}" "$@"
	fi
}

data="$work/data"
sock="$work/sock"
log="$work/server.log"
started=0
stop_server() {
	if [ "$started" = 1 ] && [ "${CV_SOAK_KEEP:-0}" != 1 ]; then
		started=0
		as_user --pg "$pg_bin/pg_ctl" -D "$data" -m fast -w -t 60 stop >/dev/null 2>&1 \
			|| as_user --pg "$pg_bin/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
}
trap stop_server EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# a fresh folder: a server left by an earlier run is stopped first
mkdir -p "$work"
[ "$(id -u)" -eq 0 ] && chown "$user" "$work"
if [ -f "$data/postmaster.pid" ]; then
	as_user --pg "$pg_bin/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
fi
rm -rf "$data" "$sock" "$log" "$work/details.log" "$work/report.txt"
as_user mkdir -p "$sock"
cp "$here/soak.py" "$work/soak.py"
[ "$(id -u)" -eq 0 ] && chown "$user" "$work/soak.py"

as_user --pg "$pg_bin/initdb" -D "$data" -U "$user" -A trust --locale=C --encoding=UTF8 --no-sync \
	>"$work/initdb.log" 2>&1 || { cat "$work/initdb.log" >&2; exit 1; }
as_user tee -a "$data/postgresql.conf" >/dev/null <<EOF

# clustervec soak (test/soak/soak.sh)
port = $port
listen_addresses = ''
unix_socket_directories = '$sock'
shared_preload_libraries = 'clustervec'
clustervec.gpu_library = '\$libdir/$library'
restart_after_crash = on
max_connections = 64
fsync = ${CV_SOAK_FSYNC:-off}
synchronous_commit = on
checkpoint_timeout = 60s
maintenance_work_mem = 64MB
max_parallel_workers_per_gather = 0
logging_collector = off
EOF
as_user --pg "$pg_bin/pg_ctl" -D "$data" -l "$log" -w -t 120 start >/dev/null \
	|| { tail -n 30 "$log" >&2; exit 1; }
started=1
postmaster=$(head -n 1 "$data/postmaster.pid")

echo "[soak] $("$PG_CONFIG" --version) in $work (port $port), clustervec from $pkglib" \
	"($(date -u -r "$pkglib/clustervec.so" '+built %Y-%m-%d %H:%M UTC')), worker library $library, $duration s"
rc=0
as_user "$python" "$work/soak.py" --host "$sock" --port "$port" --user "$user" \
	--postmaster-pid "$postmaster" --server-log "$log" --seconds "$duration" \
	--clients "${CV_SOAK_CLIENTS:-16}" --rows "${CV_SOAK_ROWS:-20000}" --dims "${CV_SOAK_DIMS:-64}" \
	--kill-min "${CV_SOAK_KILL_MIN:-5}" --kill-max "${CV_SOAK_KILL_MAX:-15}" \
	${CV_SOAK_SEED:+--seed "$CV_SOAK_SEED"} --gpu-library "$library" \
	--log "$work/details.log" --report "$work/report.txt" 2>&1 | tee "$work/soak.log" || rc=$?
exit "$rc"
