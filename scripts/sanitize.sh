#!/usr/bin/env bash
#
# sanitize.sh: the extension (clustervec.so), the CPU library
# (cuda/clustervec_cuda_cpu.so), the C unit tests of test/math and the GPU
# library's API tests built with AddressSanitizer and UndefinedBehaviorSanitizer
# (gcc, -fno-sanitize-recover=all), then:
#
#   1. the pg_regress suites (the Makefile's REGRESS) against a private server
#      (port 5493) started with the sanitizer runtime preloaded;
#   2. test/sanitize/probes.sql, hostile arguments whose answers are not
#      checked, only that the server survives them without a report;
#   3. make -C test/math run;
#   4. cuda/tests against the sanitized CPU library.
#
# Any sanitizer report fails the run: ASan's reports go to files under
# /var/tmp/clustervec-sanitize/reports (log_path), UBSan's to the server log
# (gcc's runtime does not honour log_path there), with their stacks; both are
# printed and counted, and the server log is searched for crashed backends.
# The last line is "N passed, N failed"; the exit status is 1 when anything
# failed.
#
# The sanitized build never touches the system PostgreSQL: it installs into
# a relocated copy of PostgreSQL 15 under /var/tmp/clustervec-sanitize/pgroot
# (PostgreSQL finds its share and lib folders relative to its binaries), and
# the server runs from there, with gcc's libasan, test/sanitize/asan_initfirst.c
# (why: see there) and libubsan preloaded.
#
# Knobs: the ones of lib.sh (CV_WORK_BASE, CV_MAKE_JOBS, CV_SKIP_DEPS), and
# CV_SANITIZE_STEPS, the steps to run (default "regress probes math cuda").
#
# Limits: the server's memory contexts carve small allocations out of larger
# malloc'd blocks, so ASan sees an overrun only when it leaves its block; the
# fuzz harnesses (fuzz/) give every palloc a block of its own for that.
# UBSan sees everything (PostgreSQL's -fwrapv is turned off).
# shellcheck disable=SC2317  # the steps are called through san_timed
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Set only on the commands that need them (see sanitize_start_server).
unset LD_PRELOAD ASAN_OPTIONS UBSAN_OPTIONS

# The runtimes preloaded into the server and asan_initfirst.c are gcc's.
SAN_CC=gcc
# float-cast-overflow is not in gcc's "undefined" group (it is in clang's):
# a NaN or huge float8 cast to int is exactly the kind of bug to catch here.
SAN_FLAGS="-fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer"
# PGXS compiles with PostgreSQL's -fwrapv, which turns off UBSan's signed
# overflow check; COPT lands after it on the command line.
SAN_STEPS=" ${CV_SANITIZE_STEPS:-regress probes math cuda} "
SAN_MAKE_ARGS=()

# Whether CV_SANITIZE_STEPS names a step.
san_step() { [[ "$SAN_STEPS" == *" $1 "* ]]; }

# san_timed COMMAND...: run it and log how long it took.
san_timed() {
	local started=$SECONDS rc=0
	"$@" || rc=$?
	cv_log "${1} took $((SECONDS - started)) s"
	return "$rc"
}

# The shared runtime the compiler's instrumented shared objects expect,
# preloaded into the postmaster (it must come first in the library list,
# and initialise first: test/sanitize/asan_initfirst.c).
sanitizer_runtime() {
	local lib=$1 path
	path=$(readlink -f "$("$SAN_CC" -print-file-name="lib${lib}.so")" 2>/dev/null || true)
	[ -f "$path" ] || cv_die "no shared ${lib} runtime for ${SAN_CC} (found '${path}')"
	printf '%s' "$path"
}

# Copy PostgreSQL 15's binaries, libraries, share files and headers under
# CV_PGROOT and point PG_BIN / PG_CONFIG (lib.sh's) at the copy.
make_private_root() {
	local dir
	CV_PGROOT="${CV_WORK}/pgroot"
	rm -rf "$CV_PGROOT"
	mkdir -p "${CV_PGROOT}/usr/lib/postgresql" "${CV_PGROOT}/usr/share/postgresql" "${CV_PGROOT}/usr/include"
	cv_log "copying PostgreSQL ${PG_MAJOR} into ${CV_PGROOT}"
	cp -a "/usr/lib/postgresql/${PG_MAJOR}" "${CV_PGROOT}/usr/lib/postgresql/"
	cp -a "/usr/share/postgresql/${PG_MAJOR}" "${CV_PGROOT}/usr/share/postgresql/"
	cp -a /usr/include/postgresql "${CV_PGROOT}/usr/include/"
	if cv_is_root; then
		chown -R "$CV_OS_USER": "$CV_PGROOT"
	fi
	PG_BIN="${CV_PGROOT}/usr/lib/postgresql/${PG_MAJOR}/bin"
	PG_CONFIG="${PG_BIN}/pg_config"
	for dir in "$("$PG_CONFIG" --pkglibdir)" "$("$PG_CONFIG" --sharedir)" "$("$PG_CONFIG" --includedir-server)"; do
		case "$dir" in
			"$CV_PGROOT"/*) ;;
			*) cv_die "the copied pg_config reports ${dir}, outside ${CV_PGROOT}: PostgreSQL did not relocate" ;;
		esac
	done
}

# Build the extension, the CPU library and its test programs with the
# sanitizers, as the PostgreSQL user, and install into the private root.
sanitize_build() {
	local jobs=${CV_MAKE_JOBS:-$(cv_cpu_count)}
	local log="${CV_WORK}/build.log"
	local targets=(all)
	san_step cuda && targets+=(cputest-programs)
	SAN_MAKE_ARGS=(PG_CONFIG="$PG_CONFIG" CC="${SAN_CC} ${SAN_FLAGS}" COPT=-fno-wrapv with_llvm=no)
	cv_header "Sanitized build (${SAN_CC} ${SAN_FLAGS})"
	if ! run_as_pg make -j"$jobs" "${SAN_MAKE_ARGS[@]}" "${targets[@]}" >"$log" 2>&1 \
		|| ! run_as_pg make "${SAN_MAKE_ARGS[@]}" install >>"$log" 2>&1; then
		tail -n 60 "$log"
		return 1
	fi
	if grep -E 'warning:' "$log"; then
		cv_warn "the sanitized build has warnings (above)"
	fi
	if ! ldd "${CV_SRC}/clustervec.so" | grep -E 'libasan' >/dev/null; then
		cv_warn "clustervec.so is not linked with the ASan runtime"
		return 1
	fi
	# see test/sanitize/asan_initfirst.c
	if ! run_as_pg "$SAN_CC" -shared -fPIC -Wl,-z,initfirst -o "$SAN_INITFIRST" \
		test/sanitize/asan_initfirst.c "$(sanitizer_runtime asan)" >>"$log" 2>&1; then
		tail -n 20 "$log"
		return 1
	fi
	cv_log "built and installed into $("$PG_CONFIG" --pkglibdir)"
}

# Sanitizer options.  ASan's reports go to REPORTS/asan.<pid>, UBSan's to
# stderr (gcc's libubsan ignores log_path).  The server keeps leak detection
# off (PostgreSQL leaves memory to process exit on purpose).
sanitizer_options() {
	local tool=$1 leaks=$2
	local common="abort_on_error=1:halt_on_error=1:print_stacktrace=1:disable_coredump=1"
	case "$tool" in
		asan) printf 'detect_leaks=%s:%s:allocator_may_return_null=1:max_allocation_size_mb=4096:log_path=%s/asan' \
			"$leaks" "$common" "$SAN_REPORTS" ;;
		ubsan) printf '%s' "$common" ;;
	esac
}

# Start the private server with the sanitizer runtime preloaded into the
# postmaster (and so into every backend it forks).  The variables are local
# and not exported: only the pg_ctl command line run_as_pg builds sees them.
sanitize_start_server() {
	local LD_PRELOAD ASAN_OPTIONS UBSAN_OPTIONS
	local saved_pass_env=("${CV_PASS_ENV[@]}")
	# shellcheck disable=SC2034  # read by cv_build_env through CV_PASS_ENV
	LD_PRELOAD="$(sanitizer_runtime asan) ${SAN_INITFIRST} $(sanitizer_runtime ubsan)"
	# shellcheck disable=SC2034
	ASAN_OPTIONS=$(sanitizer_options asan 0)
	# shellcheck disable=SC2034
	UBSAN_OPTIONS=$(sanitizer_options ubsan 0)
	CV_PASS_ENV+=(LD_PRELOAD ASAN_OPTIONS UBSAN_OPTIONS)
	cv_log "preloading ${LD_PRELOAD}"
	cv_start_server
	CV_PASS_ENV=("${saved_pass_env[@]}")
}

# The report lines sanitizers write to a program's stderr (UBSan's always).
SAN_REPORT_LINES='terminated by signal|ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:'

# check_reports STEP [LOG...]: print and count the ASan report files written
# since the last call, and the report lines in the LOGs (default: what the
# server log gained since the last call: UBSan reports, backends killed by
# a signal).  Returns 1 if there was any.
check_reports() {
	local step=$1 f found=0 lines=0 n
	shift
	while IFS= read -r f; do
		found=$((found + 1))
		cv_header "sanitizer report (${step}): ${f}"
		cat "$f"
		mv "$f" "${SAN_SEEN}/"
	done < <(find "$SAN_REPORTS" -maxdepth 1 -type f -name 'asan.*' 2>/dev/null | sort)
	if [ "$#" = 0 ] && [ -f "$CV_SERVER_LOG" ]; then
		n=$(grep -c -E "$SAN_REPORT_LINES" "$CV_SERVER_LOG" || true)
		lines=$((n - SAN_LOG_LINES_SEEN))
		SAN_LOG_LINES_SEEN=$n
		[ "$lines" = 0 ] || set -- "$CV_SERVER_LOG"
	fi
	for f in "$@"; do
		n=$(grep -c -E "$SAN_REPORT_LINES" "$f" || true)
		[ "$f" = "$CV_SERVER_LOG" ] || lines=$((lines + n))
		[ "$n" = 0 ] && continue
		cv_header "report lines in ${f} (${step}), with their stacks"
		grep -E -B1 -A25 "$SAN_REPORT_LINES" "$f" | tail -n 120
	done
	if [ "$found" -gt 0 ] || [ "$lines" -gt 0 ]; then
		cv_tally "reports after ${step}" 0 $((found + lines)) \
			"${found} ASan report files, ${lines} report lines in the logs"
		return 1
	fi
	return 0
}

# pg_regress lines, PG 15: "test name ... ok", "     name ... FAILED".
count_pg_regress() {
	awk '
		/^(test +| +)[^ ]+ +\.\.\. +ok/ { p++; next }
		/^(test +| +)[^ ]+ +\.\.\. +failed \(ignored\)/ { p++; next }
		/^(test +| +)[^ ]+ +\.\.\. +FAILED/ { f++; next }
		END { printf "%d %d\n", p, f }' "$1"
}

step_regress() {
	local log="${CV_WORK}/installcheck.log" rc=0 pass fail f
	cv_header "pg_regress under the sanitizers"
	# TAP_TESTS= : the TAP tests start servers of their own, without the preload
	run_as_pg make installcheck PG_CONFIG="$PG_CONFIG" TAP_TESTS= >"$log" 2>&1 || rc=$?
	cat "$log"
	read -r pass fail <<<"$(count_pg_regress "$log")"
	if [ "$rc" != 0 ]; then
		while IFS= read -r f; do cat "$f"; done < <(find "$CV_SRC" -name regression.diffs -type f)
		[ "$fail" != 0 ] || fail=1
	fi
	cv_tally "pg_regress" "$pass" "$fail" "$([ "$rc" = 0 ] || echo "make installcheck status ${rc}")"
	check_reports "pg_regress" || true
}

# Hostile arguments: errors are expected, crashes and reports are not.  A
# statement that kills its backend is noted, and the rest of the file runs
# once the server has recovered, so one run shows every such statement.
step_probes() {
	local log="${CV_WORK}/probes.log" part="${CV_WORK}/probes-part.log"
	local rest="${CV_WORK}/probes-rest.sql" from=1 rc at i alive=0
	local -a killed=()
	cv_header "hostile arguments: test/sanitize/probes.sql"
	cv_psql -d postgres -c "DROP DATABASE IF EXISTS clustervec_probes" -c "CREATE DATABASE clustervec_probes" \
		>"$log" 2>&1 || true
	while :; do
		# shellcheck disable=SC2016  # expanded by the inner bash
		run_as_pg bash -c 'tail -n +"$1" "$2" >"$3"' cv_tail "$from" test/sanitize/probes.sql "$rest"
		rc=0
		run_as_pg psql -X -d clustervec_probes -v ON_ERROR_STOP=0 -f "$rest" >"$part" 2>&1 || rc=$?
		cat "$part" >>"$log"
		[ "$rc" != 0 ] || break
		at=$(grep -oE 'probes-rest\.sql:[0-9]+: server closed the connection' "$part" | head -n 1 | cut -d: -f2)
		[ -n "$at" ] || break
		killed+=("$(sed -n "$((from + at - 1))p" "${CV_SRC}/test/sanitize/probes.sql")")
		from=$((from + at))
		for i in $(seq 1 60); do
			run_as_pg pg_isready -q -h "$CV_SOCK" -p "$CV_PORT" && break
			sleep 1
		done
	done
	cv_psql -d postgres -At -c "SELECT 1" >/dev/null 2>&1 && alive=1
	grep -c 'ERROR:' "$log" | xargs printf '[clustervec] %s probes raised an error (expected)\n'
	if [ "$rc" = 0 ] && [ "$alive" = 1 ] && [ "${#killed[@]}" = 0 ]; then
		cv_tally "probes.sql" 1 0
	else
		for i in "${killed[@]}"; do cv_log "killed its backend: ${i}"; done
		[ "$rc" = 0 ] || tail -n 30 "$part"
		cv_tally "probes.sql" 0 1 "${#killed[@]} statements killed their backend; psql status ${rc}, server alive: ${alive}"
	fi
	check_reports "probes.sql" || true
}

# Runs a command as the PostgreSQL user with the sanitizer options (and
# leak detection: these are short programs that should free what they take).
run_instrumented() {
	run_as_pg env "ASAN_OPTIONS=$(sanitizer_options asan 1)" "UBSAN_OPTIONS=$(sanitizer_options ubsan 1)" "$@"
}

step_math() {
	local log="${CV_WORK}/math.log" rc=0
	cv_header "C unit tests under the sanitizers: make -C test/math run"
	run_instrumented make -C test/math run CC="${SAN_CC} ${SAN_FLAGS}" >"$log" 2>&1 || rc=$?
	cat "$log"
	cv_tally_counted "test/math" "$log" "$rc"
	check_reports "test/math" "$log" || true
}

# The programs run CV_MAKE_JOBS at a time; each writes NAME.log and NAME.rc.
step_cuda_api() {
	local jobs=${CV_MAKE_JOBS:-$(cv_cpu_count)}
	local t name log rc
	cv_header "GPU library API tests against the sanitized CPU library (${jobs} at a time)"
	for t in "${CV_SRC}"/cuda/tests/*_test; do
		[ -x "$t" ] || continue
		name=$(basename "$t")
		while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
		(
			rc=0
			run_instrumented "cuda/tests/${name}" ./cuda/clustervec_cuda_cpu.so --require-device \
				>"${CV_WORK}/${name}.log" 2>&1 || rc=$?
			echo "$rc" >"${CV_WORK}/${name}.rc"
		) &
	done
	wait
	for t in "${CV_SRC}"/cuda/tests/*_test; do
		[ -x "$t" ] || continue
		name=$(basename "$t")
		log="${CV_WORK}/${name}.log"
		rc=$(cat "${CV_WORK}/${name}.rc" 2>/dev/null || echo "missing")
		tail -n 3 "$log"
		cv_tally_counted "cuda/tests/${name}" "$log" "$rc"
		check_reports "cuda/tests/${name}" "$log" || true
	done
}

main() {
	local started=$SECONDS
	cv_init sanitize 5493
	cv_tally_begin "sanitize.sh" sanitize "Sanitizer summary" step
	cv_install_trap
	cv_header "Dependencies"
	install_deps
	command -v "$SAN_CC" >/dev/null 2>&1 || cv_die "${SAN_CC} not found"

	cv_copy_source
	make_private_root
	SAN_REPORTS="${CV_WORK}/reports"
	SAN_SEEN="${CV_WORK}/reports/seen"
	SAN_LOG_LINES_SEEN=0
	SAN_INITFIRST="${CV_WORK}/asan_initfirst.so"
	run_as_pg -C "$CV_WORK" mkdir -p "$SAN_REPORTS" "$SAN_SEEN"
	if ! san_timed sanitize_build; then
		cv_tally "build" 0 1 "sanitized build failed (${CV_WORK}/build.log)"
		cv_tally_end
		exit 1
	fi

	if san_step regress || san_step probes; then
		cv_header "Private cluster with the sanitizer runtime preloaded (port ${CV_PORT})"
		cv_add_conf "fsync = off"
		cv_add_conf "synchronous_commit = off"
		cv_add_conf "full_page_writes = off"
		cv_add_conf "jit = off"
		cv_init_cluster
		sanitize_start_server
		if san_step regress; then san_timed step_regress; fi
		if san_step probes; then san_timed step_probes; fi
		cv_stop_server
		check_reports "server shutdown" || true
	fi
	if san_step math; then san_timed step_math; fi
	if san_step cuda; then san_timed step_cuda_api; fi

	cv_log "sanitizer suite took $((SECONDS - started)) s"
	cv_tally_end || exit 1
	exit 0
}

main "$@"
