#!/usr/bin/env bash
#
# test.sh: build, install and run every test suite of clustervec against a
# private PostgreSQL 15 cluster (port 5497, socket under
# /var/tmp/clustervec-test), then print a per-suite summary.  The last line of
# output is always "N passed, N failed"; the exit status is 1 when anything
# failed or a suite could not run.
#
# Suites: pg_regress (make installcheck), TAP (test/t/*.pl, run by make
# installcheck when the Makefile sets TAP_TESTS), the C unit tests
# (make -C test/math run), the Citus suite (test/citus, where Citus is
# installed: suite_citus), the GPU library's API tests against the CPU shim
# (cuda/tests), the numeric tests (test/numeric/test_*.py, with
# Debian's /usr/bin/python3) and the Python client's tests (python/tests);
# then, each with a build and a server of its own, scripts/sanitize.sh
# (ASan + UBSan), scripts/fuzz.sh (libFuzzer) and scripts/demo.sh (the
# README's first command, which prints its own wall time).
# CV_TEST_SEED fixes the random seeds.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PYTHON=/usr/bin/python3
TEST_DB=clustervec_test

# run_logged LOGFILE COMMAND...: run as the PostgreSQL user, stream the output
# and keep a copy; returns the command's status.
run_logged() {
	local log=$1
	shift
	local rc=0
	run_as_pg "$@" 2>&1 | tee "$log" || rc=$?
	return "$rc"
}


# pg_regress lines, PG 15: "test name ... ok 12 ms", "     name ... FAILED",
# "     name ... failed (ignored)".  Prints "passed failed".
parse_pg_regress() {
	awk '
		/^(test +| +)[^ ]+ +\.\.\. +ok/ { p++; next }
		/^(test +| +)[^ ]+ +\.\.\. +failed \(ignored\)/ { p++; next }
		/^(test +| +)[^ ]+ +\.\.\. +FAILED/ { f++; next }
		END { printf "%d %d\n", p, f }' "$1"
}

# prove's summary: "Files=N, Tests=M, ..." and one "file.pl (Wstat: ...)" per
# failed file; a file that skipped itself ("file.pl .. skipped: why", as
# 009_pgvector.pl without pgvector) is neither passed nor failed.  Prints
# "passed failed", or nothing when prove did not run.
parse_prove() {
	awk '
		/^Files=[0-9]+, Tests=/ { seen = 1; split($1, a, "="); files = a[2] + 0 }
		/^[^ ]+\.(pl|t) +\(Wstat: / { bad++ }
		/^[^ ]+\.(pl|t) \.+ skipped: / { skipped++ }
		END { if (seen) printf "%d %d\n", files - bad - skipped, bad }' "$1"
}

# The TAP files that skipped themselves, "name: why; ...", or nothing.
prove_skips() {
	grep -aoE '^[^ ]+\.(pl|t) \.+ skipped: .*' "$1" | sed -E 's|^([^ ]*/)?([^ /]+) \.+ skipped: |\2: |' \
		| paste -sd ';' - || true
}

# Print every regression.diffs of the build copy.
print_regression_diffs() {
	local f found=0
	while IFS= read -r f; do
		found=1
		cv_header "regression diffs: ${f#"$CV_SRC"/}"
		cat "$f"
	done < <(find "$CV_SRC" -name regression.diffs -type f 2>/dev/null)
	[ "$found" = 1 ] || cv_log "no regression.diffs found"
}

suite_regress_and_tap() {
	local log="${CV_WORK}/installcheck.log" rc=0 counts pass fail skips
	cv_header "pg_regress: make installcheck"
	run_logged "$log" make installcheck PG_CONFIG="$PG_CONFIG" || rc=$?
	read -r pass fail <<<"$(parse_pg_regress "$log")"
	if [ "$rc" != 0 ] && { [ "$fail" != 0 ] || [ $((pass + fail)) = 0 ]; }; then
		print_regression_diffs
	fi
	if [ $((pass + fail)) = 0 ]; then
		cv_tally "pg_regress" 0 1 "no test ran: make installcheck exit status ${rc}"
	elif [ "$rc" != 0 ] && [ "$fail" = 0 ] && ! grep -qE '^Files=[0-9]+, Tests=' "$log"; then
		cv_tally "pg_regress" "$pass" 1 "make installcheck exit status ${rc}"
	else
		cv_tally "pg_regress" "$pass" "$fail" ""
	fi

	# TAP tests: make installcheck runs them after pg_regress, so a pg_regress
	# failure skips them; then run them alone (REGRESS emptied).
	if ! compgen -G "${CV_SRC}/test/t/*.pl" >/dev/null; then
		cv_log "no test/t/*.pl: no TAP suite"
		return 0
	fi
	local tap_log=$log tap_rc=$rc
	if [ -z "$(parse_prove "$log")" ] && [ "$rc" != 0 ]; then
		cv_header "TAP: make installcheck REGRESS= (pg_regress failed, so TAP tests did not run)"
		tap_log="${CV_WORK}/installcheck-tap.log"
		tap_rc=0
		run_logged "$tap_log" make installcheck PG_CONFIG="$PG_CONFIG" REGRESS= ISOLATION= || tap_rc=$?
	fi
	counts=$(parse_prove "$tap_log")
	if [ -z "$counts" ]; then
		cv_tally "tap" 0 1 "test/t/*.pl exist but make installcheck ran no TAP tests (TAP_TESTS unset?)"
		return 0
	fi
	read -r pass fail <<<"$counts"
	if grep -q '^Result: FAIL' "$tap_log" && [ "$fail" = 0 ]; then
		fail=1
	fi
	skips=$(prove_skips "$tap_log")
	if [ "$tap_log" != "$log" ] && [ "$tap_rc" != 0 ] && [ "$fail" = 0 ]; then
		cv_tally "tap" "$pass" 1 "exit status ${tap_rc}${skips:+; skipped: $skips}"
	else
		cv_tally "tap" "$pass" "$fail" "${skips:+skipped: $skips}"
	fi
}

suite_math() {
	local log="${CV_WORK}/math.log" rc=0
	cv_header "C unit tests: make -C test/math run"
	if [ ! -f "${CV_SRC}/test/math/Makefile" ]; then
		cv_tally "math (test/math)" 0 1 "test/math/Makefile missing"
		return 0
	fi
	run_logged "$log" make -C test/math run PG_CONFIG="$PG_CONFIG" || rc=$?
	cv_tally_counted "math (test/math)" "$log" "$rc"
}

# The GPU library's API tests (cuda/tests), against the CPU shim: the same
# programs run against clustervec_cuda.so on the GPU machine.
suite_cuda_api() {
	local log="${CV_WORK}/cuda-build.log" t name rc
	cv_header "GPU library API tests against the CPU shim: make cputest-programs"
	if ! run_logged "$log" make cputest-programs cuda/clustervec_cuda_cpu.so PG_CONFIG="$PG_CONFIG"; then
		cv_tally "cuda api" 0 1 "building cuda/tests failed"
		return 0
	fi
	for t in "${CV_SRC}"/cuda/tests/*_test; do
		[ -x "$t" ] || continue
		name="cuda api/$(basename "$t")"
		log="${CV_WORK}/$(basename "$t").log"
		rc=0
		run_logged "$log" "cuda/tests/$(basename "$t")" ./cuda/clustervec_cuda_cpu.so --require-device || rc=$?
		cv_tally_counted "$name" "$log" "$rc"
	done
}

suite_numeric() {
	local f name log rc found=0
	if ! cv_psql -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS ${TEST_DB}" -c "CREATE DATABASE ${TEST_DB}"; then
		cv_tally "numeric" 0 1 "could not create database ${TEST_DB}"
		return 0
	fi
	for f in "${CV_SRC}"/test/numeric/test_*.py; do
		[ -f "$f" ] || continue
		found=1
		name="numeric/$(basename "$f" .py)"
		log="${CV_WORK}/$(basename "$f" .py).log"
		rc=0
		cv_header "numeric tests: ${PYTHON} test/numeric/$(basename "$f")"
		CV_PGDATABASE=$TEST_DB run_logged "$log" "$PYTHON" "test/numeric/$(basename "$f")" || rc=$?
		cv_tally_counted "$name" "$log" "$rc"
	done
	[ "$found" = 1 ] || cv_tally "numeric" 0 1 "no test/numeric/test_*.py"
}

# The Python client (python/: adapters, cluster_health, report) against the
# private cluster, in a database of its own.
suite_python() {
	local db=clustervec_python log="${CV_WORK}/python.log" rc=0
	cv_header "Python client tests: PYTHONPATH=python ${PYTHON} python/tests/run.py"
	if ! cv_psql -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS ${db}" -c "CREATE DATABASE ${db}"; then
		cv_tally "python" 0 1 "could not create database ${db}"
		return 0
	fi
	CV_PGDATABASE=$db run_logged "$log" env PYTHONPATH=python "$PYTHON" python/tests/run.py || rc=$?
	cv_tally_counted "python" "$log" "$rc"
}

# The extension, the CPU library and the unit tests built with ASan + UBSan,
# against a private server of their own (scripts/sanitize.sh, port 5493).
suite_sanitize() {
	local log="${CV_WORK}/sanitize.log" rc=0
	cv_header "ASan + UBSan: bash scripts/sanitize.sh"
	CV_SKIP_DEPS=1 bash "${CV_ROOT}/scripts/sanitize.sh" 2>&1 | tee "$log" || rc=$?
	cv_tally_counted "sanitize" "$log" "$rc"
}

# The libFuzzer harnesses of fuzz/ (scripts/fuzz.sh): the reproducers of
# fuzz/regressions replayed, then every target fuzzed for CV_FUZZ_SECONDS.
suite_fuzz() {
	local log="${CV_WORK}/fuzz.log" rc=0
	cv_header "libFuzzer: bash scripts/fuzz.sh"
	CV_SKIP_DEPS=1 bash "${CV_ROOT}/scripts/fuzz.sh" 2>&1 | tee "$log" || rc=$?
	cv_tally_counted "fuzz" "$log" "$rc"
}

# The README's first command, scripts/demo.sh, end to end (its own server,
# port 5498): it must work, and it prints its own wall time on this machine,
# the packages installed by now as a user's second command finds them.
suite_demo() {
	local log="${CV_WORK}/demo.log" rc=0 took
	cv_header "The demo: bash scripts/demo.sh"
	CV_SKIP_DEPS=1 bash "${CV_ROOT}/scripts/demo.sh" 2>&1 | tee "$log" || rc=$?
	took=$(grep -aoE 'demo took [0-9]+ s' "$log" | tail -n 1 || true)
	if [ "$rc" = 0 ] && [ -n "$took" ]; then
		cv_tally "demo" 1 0 "$took"
	else
		cv_tally "demo" 0 1 "exit status ${rc}${took:+, $took}"
	fi
}

# The Citus suite (test/citus, issue 17), against the PostgreSQL that has
# Citus: the install root CLUSTERVEC_CITUS_PGROOT names (a private copy of
# PostgreSQL 15 with Citus built into it, README "Citus"), else this
# PostgreSQL when its pkglibdir holds citus.so.  Prints its pg_config, or
# nothing when there is no Citus.
citus_pg_config() {
	local pg_config=$PG_CONFIG
	if [ -n "${CLUSTERVEC_CITUS_PGROOT:-}" ]; then
		pg_config="${CLUSTERVEC_CITUS_PGROOT}/usr/lib/postgresql/${PG_MAJOR}/bin/pg_config"
	fi
	if [ -x "$pg_config" ] && [ -f "$("$pg_config" --pkglibdir)/citus.so" ]; then
		printf '%s' "$pg_config"
	fi
}

# A coordinator and two workers of the suite's own (ports 5530-5532, data
# under the work folder); clustervec is installed into Citus's PostgreSQL
# first when that is another root.  Without Citus: one line, no tally (CI).
suite_citus() {
	local pg_config pgxs log="${CV_WORK}/citus.log" rc=0 counts pass fail tests skips f files=()
	pg_config=$(citus_pg_config)
	if [ -z "$pg_config" ]; then
		cv_log "citus (test/citus): skipped, Citus is not installed (no citus.so in $("$PG_CONFIG" --pkglibdir); CLUSTERVEC_CITUS_PGROOT names a root that has it)"
		return 0
	fi
	cv_header "Citus: prove test/citus against $(dirname "$pg_config")"
	if [ "$pg_config" != "$PG_CONFIG" ]; then
		if ! cv_run_here "$CV_SRC" make install PG_CONFIG="$pg_config" >"${CV_WORK}/citus-install.log" 2>&1; then
			cv_tally "citus (test/citus)" 0 1 "make install into $(dirname "$pg_config") failed"
			return 0
		fi
		if cv_is_root; then
			chown -R "$CV_OS_USER": "$CV_SRC"
		fi
	fi
	for f in "${CV_SRC}"/test/citus/*.pl; do
		files+=("test/citus/$(basename "$f")")
	done
	run_as_pg rm -rf "${CV_WORK}/citus"
	run_as_pg mkdir -p "${CV_WORK}/citus"
	# what PGXS's prove_installcheck sets, with the test data in the work folder
	pgxs="$("$pg_config" --pkglibdir)/pgxs/src"
	run_logged "$log" env PATH="$("$pg_config" --bindir):$(cv_pg_path)" TESTDIR="${CV_WORK}/citus" \
		PG_REGRESS="${pgxs}/test/regress/pg_regress" \
		prove -I "${pgxs}/test/perl" -I test/t "${files[@]}" || rc=$?
	counts=$(parse_prove "$log")
	if [ -z "$counts" ]; then
		cv_tally "citus (test/citus)" 0 1 "prove did not run: exit status ${rc}"
		return 0
	fi
	read -r pass fail <<<"$counts"
	[ "$rc" = 0 ] || [ "$fail" != 0 ] || fail=1
	tests=$(grep -aoE '^Files=[0-9]+, Tests=[0-9]+' "$log" | sed -E 's/.*Tests=//' || true)
	skips=$(prove_skips "$log")
	cv_tally "citus (test/citus)" "$pass" "$fail" "${tests:-0} tests${skips:+; skipped: $skips}"
}

main() {
	cv_init test 5497
	cv_tally_begin "test.sh" suite "Summary" suite
	cv_install_trap
	cv_header "Dependencies"
	install_deps
	[ -x "$PYTHON" ] || cv_die "${PYTHON} not found (install python3-numpy)"

	cv_header "Build"
	cv_copy_source
	if ! cv_build; then
		cv_tally "build" 0 1 "make failed"
		cv_tally_end
		exit 1
	fi
	if ! cv_install; then
		cv_tally "install" 0 1 "make install failed"
		cv_tally_end
		exit 1
	fi

	cv_header "Private cluster"
	cv_add_conf "fsync = off"
	cv_add_conf "synchronous_commit = off"
	cv_add_conf "full_page_writes = off"
	cv_init_cluster
	cv_start_server

	suite_regress_and_tap
	suite_citus
	suite_math
	suite_cuda_api
	suite_numeric
	suite_python
	suite_sanitize
	suite_fuzz
	suite_demo

	cv_stop_server
	cv_tally_end || exit 1
	exit 0
}

main "$@"
