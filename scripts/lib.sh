# shellcheck shell=bash
#
# lib.sh: shared plumbing for scripts/demo.sh and scripts/test.sh.
#
# Source it (it defines functions and a few CV_* variables, runs nothing):
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#   cv_init test 5497     # work folder /var/tmp/clustervec-test, port 5497
#   install_deps
#   cv_copy_source && cv_build && cv_install
#   cv_init_cluster && cv_start_server    # stopped again by the EXIT trap
#
# Run as root, the build and the server run as the unprivileged OS user
# "postgres" in a copy of the checkout outside it (PostgreSQL refuses to run
# as root, and the TAP tests run initdb); only "make install" runs as root.
# Run as another user, everything runs as that user and "make install" needs
# write access to PostgreSQL's directories (or password-less sudo).
#
# Knobs (environment): CV_WORK_BASE (default /var/tmp), CV_MAKE_JOBS
# (default: number of CPUs), CV_PG_EXTRA_CONF (extra postgresql.conf lines),
# CV_SKIP_DEPS=1 (do not check or install packages), CV_SKIP_INSTALL=1 (use
# the clustervec already installed, e.g. by hand with sudo).

CV_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PG_MAJOR=15
PG_BIN="/usr/lib/postgresql/${PG_MAJOR}/bin"
PG_CONFIG="${PG_BIN}/pg_config"

# Debian packages the scripts need; the CI image has only postgresql-15.
CV_DEB_PACKAGES=(
	"postgresql-${PG_MAJOR}"
	"postgresql-server-dev-${PG_MAJOR}"
	build-essential
	libipc-run-perl
	python3-numpy
	python3-sklearn
	python3-psycopg2
	python3-psycopg
	python3-pandas
	python3-matplotlib
	# test/t/012_pg_cron.pl: the README's pg_cron recipes under the real pg_cron
	"postgresql-${PG_MAJOR}-cron"
	# test/t/006_crash_windows.pl, 016_retrain.pl: crashes placed between WAL records
	gdb
	# scripts/fuzz.sh: clang's libFuzzer and sanitizer runtimes, llvm-symbolizer
	clang
	libclang-rt-14-dev
	llvm
)

# Variables passed through to commands run as the PostgreSQL user, when set.
CV_PASS_ENV=(CI CV_TEST_SEED PROVE_FLAGS PG_TEST_EXTRA NVCC CUDA CUDA_HOME CUDA_PATH CV_CITUS_PORT)

cv_log() { printf '[clustervec] %s\n' "$*"; }
cv_warn() { printf '[clustervec] WARNING: %s\n' "$*" >&2; }
cv_die() { printf '[clustervec] ERROR: %s\n' "$*" >&2; exit 1; }

# Print a section header.
cv_header() {
	printf '\n==================================================================\n'
	printf '== %s\n' "$*"
	printf '==================================================================\n'
}

cv_is_root() { [ "$(id -u)" -eq 0 ]; }

cv_cpu_count() { nproc 2>/dev/null || echo 2; }

# ---------------------------------------------------------------------------
# Packages
# ---------------------------------------------------------------------------

# The packages of CV_DEB_PACKAGES that are not installed.
cv_missing_packages() {
	local pkg status
	for pkg in "${CV_DEB_PACKAGES[@]}"; do
		status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
		case "$status" in
			*"install ok installed"*) ;;
			*) printf '%s\n' "$pkg" ;;
		esac
	done
}

# Install (as root) or name (otherwise) the Debian packages that are missing.
install_deps() {
	if [ "${CV_SKIP_DEPS:-0}" = 1 ]; then
		cv_log "CV_SKIP_DEPS=1: not checking packages"
		return 0
	fi
	if ! command -v dpkg-query >/dev/null 2>&1; then
		cv_warn "not a Debian system: make sure PostgreSQL ${PG_MAJOR} (server and" \
			"dev files), a C compiler, IPC::Run, numpy, scikit-learn and psycopg2 are installed"
		return 0
	fi
	local missing
	missing=$(cv_missing_packages | tr '\n' ' ')
	missing=${missing% }
	if [ -z "$missing" ]; then
		cv_log "packages: all present"
		return 0
	fi
	if ! cv_is_root; then
		cv_die "missing packages: ${missing}
    install them first, e.g.:  sudo apt-get install -y ${missing}"
	fi
	cv_log "installing missing packages: ${missing}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q || cv_warn "apt-get update failed; trying the install anyway"
	# shellcheck disable=SC2086  # word splitting of the package list is wanted
	apt-get install -y -q --no-install-recommends ${missing} \
		|| cv_die "apt-get install failed for: ${missing}"
	missing=$(cv_missing_packages | tr '\n' ' ')
	[ -z "${missing// /}" ] || cv_die "still missing after apt-get: ${missing}"
}

# ---------------------------------------------------------------------------
# Work folder, users, environment
# ---------------------------------------------------------------------------

# cv_init PURPOSE PORT: set the CV_* paths of a private cluster and its build.
cv_init() {
	local purpose=$1
	CV_PORT=$2
	local base=${CV_WORK_BASE:-/var/tmp}
	if cv_is_root; then
		CV_OS_USER=postgres
		CV_WORK="${base}/clustervec-${purpose}"
	else
		CV_OS_USER=$(id -un)
		CV_WORK="${base}/clustervec-${purpose}-${CV_OS_USER}"
	fi
	CV_DB_SUPERUSER=$CV_OS_USER
	CV_SRC="${CV_WORK}/src"
	CV_DATA="${CV_WORK}/data"
	CV_SOCK="${CV_WORK}/sock"
	CV_SERVER_LOG="${CV_WORK}/server.log"
	CV_SERVER_STARTED=0
	CV_PG_CONF_LINES=()
	case "$CV_WORK" in
		"$CV_ROOT"|"$CV_ROOT"/*) cv_die "work folder ${CV_WORK} is inside the checkout" ;;
	esac
}

# The PATH commands run with: PostgreSQL 15 first, then the system's.
cv_pg_path() {
	local path="${PG_BIN}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	local nvcc
	nvcc=$(command -v nvcc 2>/dev/null || true)
	if [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
		nvcc=/usr/local/cuda/bin/nvcc
	fi
	[ -n "$nvcc" ] && path="${path}:$(dirname "$nvcc")"
	if ! cv_is_root; then
		path="${path}:${PATH}"
	fi
	printf '%s' "$path"
}

# Fill the array CV_ENV with NAME=value words for `env -i`.
cv_build_env() {
	local home name
	if cv_is_root; then
		home=$(getent passwd "$CV_OS_USER" | cut -d: -f6)
	else
		home=${HOME:-/tmp}
	fi
	CV_ENV=(
		"PATH=$(cv_pg_path)"
		"HOME=${home:-/tmp}"
		"USER=${CV_OS_USER}"
		"LOGNAME=${CV_OS_USER}"
		"LANG=C.UTF-8"
		"PGHOST=${CV_SOCK}"
		"PGPORT=${CV_PORT}"
		"PGUSER=${CV_DB_SUPERUSER}"
		"PGDATABASE=${CV_PGDATABASE:-postgres}"
		"PG_CONFIG=${PG_CONFIG}"
		"PYTHONDONTWRITEBYTECODE=1"
	)
	for name in "${CV_PASS_ENV[@]}"; do
		if [ -n "${!name+x}" ]; then
			CV_ENV+=("${name}=${!name}")
		fi
	done
}

# run_as_pg [-C DIR] COMMAND [ARGS...]: run a command as the PostgreSQL OS
# user (postgres when we are root, ourselves otherwise), with a clean
# environment that points libpq at the private cluster, in DIR (default: the
# build copy, else the work folder).  Example: run_as_pg bash -c 'make'.
run_as_pg() {
	local dir
	if [ "${1:-}" = "-C" ]; then
		dir=$2
		shift 2
	elif [ -d "${CV_SRC:-}" ]; then
		dir=$CV_SRC
	else
		dir=${CV_WORK:-/}
	fi
	cv_build_env
	# bash -c 'cd DIR && exec "$@"' keeps the arguments intact.
	# shellcheck disable=SC2016  # expanded by the inner bash, not here
	local -a cmd=(env -i "${CV_ENV[@]}" /bin/bash -c 'cd "$1" && shift && exec "$@"' cv_run "$dir" "$@")
	if ! cv_is_root; then
		"${cmd[@]}"
	elif command -v runuser >/dev/null 2>&1; then
		runuser -u "$CV_OS_USER" -- "${cmd[@]}"
	else
		su "$CV_OS_USER" -s /bin/bash -c "$(printf '%q ' "${cmd[@]}")"
	fi
}

# Run a command as ourselves (root or not) with the same clean environment.
cv_run_here() {
	local dir=$1
	shift
	cv_build_env
	# shellcheck disable=SC2016  # expanded by the inner bash, not here
	env -i "${CV_ENV[@]}" /bin/bash -c 'cd "$1" && shift && exec "$@"' cv_run "$dir" "$@"
}

# psql against the private cluster: cv_psql [psql args...].
cv_psql() {
	run_as_pg -C "$CV_WORK" psql -X -q -v ON_ERROR_STOP=1 "$@"
}

# ---------------------------------------------------------------------------
# Copy, build, install
# ---------------------------------------------------------------------------

# Stop a server left running in the work folder by an earlier run.
cv_stop_stale_server() {
	if [ -f "${CV_DATA}/postmaster.pid" ] && [ -x "${PG_BIN}/pg_ctl" ]; then
		cv_log "stopping a server left running in ${CV_DATA}"
		run_as_pg -C "$CV_WORK" "${PG_BIN}/pg_ctl" -D "$CV_DATA" -m immediate -w stop \
			>>"${CV_WORK}/pg_ctl.log" 2>&1 || true
	fi
}

# Create the work folder, owned by the PostgreSQL OS user.
cv_prepare_work() {
	if cv_is_root; then
		id "$CV_OS_USER" >/dev/null 2>&1 \
			|| cv_die "OS user ${CV_OS_USER} does not exist (is postgresql-${PG_MAJOR} installed?)"
	fi
	mkdir -p "$CV_WORK"
	if cv_is_root; then
		chown "$CV_OS_USER": "$CV_WORK"
	fi
	[ -w "$CV_WORK" ] || cv_die "cannot write to ${CV_WORK}"
	chmod 755 "$CV_WORK"
	cv_stop_stale_server
}

# The files to copy, NUL-separated, relative to CV_ROOT: what git tracks plus
# what it does not ignore; without git, everything but .git and build outputs.
cv_source_list() {
	local list
	if command -v git >/dev/null 2>&1 \
		&& list=$(git -C "$CV_ROOT" ls-files -z --cached --others --exclude-standard 2>/dev/null | tr '\0' '\n') \
		&& [ -n "$list" ]; then
		local f
		while IFS= read -r f; do
			# ls-files lists tracked files deleted from the work tree too
			if [ -f "${CV_ROOT}/${f}" ] || [ -L "${CV_ROOT}/${f}" ]; then
				printf '%s\0' "$f"
			fi
		done <<<"$list"
	else
		(cd "$CV_ROOT" && find . \
			\( -name .git -o -name tmp_check -o -name results -o -name log \
			-o -name __pycache__ -o -name .gpu -o -name .gl \) -prune \
			-o -type f ! -name '*.o' ! -name '*.so' ! -name '*.bc' ! -name '*.a' \
			! -name regression.diffs ! -name regression.out -print0)
	fi
}

# Copy the checkout to CV_SRC (fresh each time) and link ../shared beside it.
cv_copy_source() {
	cv_prepare_work
	rm -rf "$CV_SRC"
	mkdir -p "$CV_SRC"
	cv_log "copying ${CV_ROOT} to ${CV_SRC}"
	cv_source_list | tar -C "$CV_ROOT" --null -T - -cf - | tar -C "$CV_SRC" -xf - \
		|| cv_die "copying the checkout failed"
	# CI keeps ../shared beside the checkout; keep it beside the copy too.
	rm -f "${CV_WORK}/shared"
	if [ -d "${CV_ROOT}/../shared" ]; then
		ln -s "$(cd "${CV_ROOT}/../shared" && pwd)" "${CV_WORK}/shared"
	fi
	if cv_is_root; then
		chown -R "$CV_OS_USER": "$CV_SRC"
	fi
}

# Build the copy as the PostgreSQL OS user.
cv_build() {
	local jobs=${CV_MAKE_JOBS:-$(cv_cpu_count)}
	cv_log "building in ${CV_SRC} as ${CV_OS_USER} (make -j${jobs})"
	run_as_pg make -j"$jobs" PG_CONFIG="$PG_CONFIG"
}

# Install the built copy into PostgreSQL 15 (needs root or write access).
cv_install() {
	local pkglibdir sharedir
	if [ "${CV_SKIP_INSTALL:-0}" = 1 ]; then
		cv_log "CV_SKIP_INSTALL=1: using the clustervec already installed"
		return 0
	fi
	pkglibdir=$("$PG_CONFIG" --pkglibdir)
	sharedir=$("$PG_CONFIG" --sharedir)
	cv_log "installing into ${pkglibdir} and ${sharedir}/extension"
	if cv_is_root; then
		cv_run_here "$CV_SRC" make install PG_CONFIG="$PG_CONFIG" || return 1
		chown -R "$CV_OS_USER": "$CV_SRC"
	elif [ -w "$pkglibdir" ] && [ -w "${sharedir}/extension" ]; then
		cv_run_here "$CV_SRC" make install PG_CONFIG="$PG_CONFIG"
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo -n make -C "$CV_SRC" install PG_CONFIG="$PG_CONFIG"
	else
		printf '[clustervec] ERROR: "make install" needs root: PostgreSQL %s directories are not writable by %s.\n' \
			"$PG_MAJOR" "$CV_OS_USER" >&2
		printf '[clustervec]   Either run this script as root (e.g. sudo bash %s),\n' "$0" >&2
		printf '[clustervec]   or install by hand:  sudo make -C %s install PG_CONFIG=%s\n' \
			"$CV_SRC" "$PG_CONFIG" >&2
		printf '[clustervec]   and run again with CV_SKIP_INSTALL=1.\n' >&2
		return 1
	fi
}

# ---------------------------------------------------------------------------
# Private cluster
# ---------------------------------------------------------------------------

# Add a postgresql.conf line for the next cv_init_cluster.
cv_add_conf() { CV_PG_CONF_LINES+=("$*"); }

# initdb a fresh data directory in the work folder and configure it.
cv_init_cluster() {
	cv_prepare_work
	rm -rf "$CV_DATA" "$CV_SOCK" "$CV_SERVER_LOG"
	run_as_pg -C "$CV_WORK" mkdir -p "$CV_SOCK"
	cv_log "initdb ${CV_DATA}"
	if ! run_as_pg -C "$CV_WORK" "${PG_BIN}/initdb" -D "$CV_DATA" -U "$CV_DB_SUPERUSER" \
		-A trust --locale=C --encoding=UTF8 --no-sync >"${CV_WORK}/initdb.log" 2>&1; then
		cat "${CV_WORK}/initdb.log" >&2
		cv_die "initdb failed"
	fi
	local conf
	conf=$(
		printf '\n# clustervec private cluster (scripts/lib.sh)\n'
		printf "port = %s\n" "$CV_PORT"
		printf "listen_addresses = ''\n"
		printf "unix_socket_directories = '%s'\n" "$CV_SOCK"
		printf "logging_collector = off\n"
		printf "log_min_messages = warning\n"
		printf "max_worker_processes = 16\n"
		printf "max_parallel_workers = 8\n"
		local line
		for line in "${CV_PG_CONF_LINES[@]}"; do printf '%s\n' "$line"; done
		[ -n "${CV_PG_EXTRA_CONF:-}" ] && printf '%s\n' "$CV_PG_EXTRA_CONF"
		true
	)
	# shellcheck disable=SC2016  # expanded by the inner bash, not here
	printf '%s\n' "$conf" | run_as_pg -C "$CV_WORK" bash -c 'cat >> "$1"' cv_conf "${CV_DATA}/postgresql.conf"
}

# Start the private cluster; the EXIT trap installed here stops it.
cv_start_server() {
	cv_install_trap
	cv_log "starting PostgreSQL ${PG_MAJOR} on port ${CV_PORT} (socket ${CV_SOCK})"
	if ! run_as_pg -C "$CV_WORK" "${PG_BIN}/pg_ctl" -D "$CV_DATA" -l "$CV_SERVER_LOG" \
		-w -t 120 start >>"${CV_WORK}/pg_ctl.log" 2>&1; then
		printf '[clustervec] server log (%s):\n' "$CV_SERVER_LOG" >&2
		tail -n 40 "$CV_SERVER_LOG" >&2 || true
		cv_die "pg_ctl start failed"
	fi
	CV_SERVER_STARTED=1
}

# Stop the private cluster if this script started it (quietly: output goes to
# the work folder, so callers can keep their last line of output).
cv_stop_server() {
	if [ "${CV_SERVER_STARTED:-0}" = 1 ]; then
		CV_SERVER_STARTED=0
		run_as_pg -C "$CV_WORK" "${PG_BIN}/pg_ctl" -D "$CV_DATA" -m fast -w -t 60 stop \
			>>"${CV_WORK}/pg_ctl.log" 2>&1 \
			|| run_as_pg -C "$CV_WORK" "${PG_BIN}/pg_ctl" -D "$CV_DATA" -m immediate -w stop \
				>>"${CV_WORK}/pg_ctl.log" 2>&1 || true
	fi
}

# ---------------------------------------------------------------------
# The tally of a script that ends with "N passed, N failed" (test.sh's
# suites, sanitize.sh's and fuzz.sh's steps): cv_tally_begin once, cv_tally
# (or cv_tally_counted) per step, cv_tally_end at the end.  A script that
# stops before cv_tally_end still prints the totals, its abort counted as a
# failure (cv__on_exit).
CV_TALLY_SCRIPT=""
CV_TALLY_WORD=""
CV_TALLY_TITLE=""
CV_TALLY_COLUMN=""
CV_TALLY_NAMES=()
CV_TALLY_PASSED=()
CV_TALLY_FAILED=()
CV_TALLY_NOTES=()
CV_TALLY_DONE=0

# cv_tally_begin SCRIPT WORD TITLE COLUMN: "WORD NAME: ..." as each step is
# counted, then the table under TITLE with COLUMN over the names.
cv_tally_begin() {
	CV_TALLY_SCRIPT=$1
	CV_TALLY_WORD=$2
	CV_TALLY_TITLE=$3
	CV_TALLY_COLUMN=$4
}

# cv_tally NAME PASSED FAILED [NOTE]
cv_tally() {
	CV_TALLY_NAMES+=("$1")
	CV_TALLY_PASSED+=("$2")
	CV_TALLY_FAILED+=("$3")
	CV_TALLY_NOTES+=("${4:-}")
	cv_log "${CV_TALLY_WORD} ${1}: ${2} passed, ${3} failed${4:+ ($4)}"
}

# The last "N passed, N failed" of a log, as "N N", or nothing.
cv_parse_counts() {
	grep -aoE '[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1 \
		| sed -E 's/([0-9]+) passed, ([0-9]+) failed/\1 \2/' || true
}

# cv_tally_counted NAME LOG RC: a step whose log ends with "N passed, N failed".
cv_tally_counted() {
	local name=$1 log=$2 rc=$3 counts pass fail note=""
	counts=$(cv_parse_counts "$log")
	if [ -z "$counts" ]; then
		cv_tally "$name" 0 1 "crashed: exit status ${rc}, no 'N passed, N failed' line"
		return
	fi
	read -r pass fail <<<"$counts"
	if [ "$rc" != 0 ] && [ "$fail" = 0 ]; then
		fail=1
		note="exit status ${rc} although no test failed"
	fi
	cv_tally "$name" "$pass" "$fail" "$note"
}

# Prints the table and, as the very last line, the totals; 1 when a step failed.
cv_tally_end() {
	local i total_pass=0 total_fail=0
	CV_TALLY_DONE=1
	cv_header "$CV_TALLY_TITLE"
	printf '%-34s %8s %8s  %s\n' "$CV_TALLY_COLUMN" passed failed note
	for i in "${!CV_TALLY_NAMES[@]}"; do
		printf '%-34s %8s %8s  %s\n' "${CV_TALLY_NAMES[$i]}" "${CV_TALLY_PASSED[$i]}" \
			"${CV_TALLY_FAILED[$i]}" "${CV_TALLY_NOTES[$i]}"
		total_pass=$((total_pass + CV_TALLY_PASSED[i]))
		total_fail=$((total_fail + CV_TALLY_FAILED[i]))
	done
	printf '%s passed, %s failed\n' "$total_pass" "$total_fail"
	[ "$total_fail" = 0 ]
}

# EXIT trap: stop the server, close an unfinished tally, then run the
# caller's cv_exit_hook if defined.
cv__on_exit() {
	local rc=$?
	set +e
	if [ "${CV_KEEP_SERVER:-0}" != 1 ]; then
		cv_stop_server
	fi
	if [ -n "$CV_TALLY_SCRIPT" ] && [ "$CV_TALLY_DONE" = 0 ]; then
		cv_tally "$CV_TALLY_SCRIPT" 0 1 "aborted with status ${rc}"
		cv_tally_end
		rc=1
	fi
	if declare -F cv_exit_hook >/dev/null; then
		cv_exit_hook "$rc"
		rc=$?
	fi
	exit "$rc"
}

cv_install_trap() {
	trap cv__on_exit EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}
