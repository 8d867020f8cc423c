#!/usr/bin/env bash
#
# fuzz.sh: build the libFuzzer harnesses of fuzz/ (clang, ASan + UBSan) in a
# copy of the checkout (/var/tmp/clustervec-fuzz, as the PostgreSQL user),
# then for each target:
#
#   1. replay every reproducer kept in fuzz/regressions/<target>/ (a crash
#      found once must stay fixed);
#   2. fuzz for CV_FUZZ_SECONDS (default 45) from the seed corpus
#      fuzz/corpus/<target>/, in a scratch copy of it.
#
# A crash, a sanitizer report, a leak or an out-of-memory fails the target;
# its reproducer is kept under /var/tmp/clustervec-fuzz/artifacts/<target>/
# and printed in base64, to be saved under fuzz/regressions/<target>/ once
# understood.  The last line is "N passed, N failed" (one replay and one run
# per target); the exit status is 1 when anything failed.
#
# Knobs: CV_FUZZ_SECONDS, CV_FUZZ_TARGETS (default: all of fuzz/Makefile),
# CV_FUZZ_CC (default clang-14), and lib.sh's CV_WORK_BASE, CV_MAKE_JOBS,
# CV_SKIP_DEPS.  By hand: make -C fuzz; fuzz/build/fuzz_cvec_in fuzz/corpus/cvec_in
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

FUZZ_SECONDS=${CV_FUZZ_SECONDS:-45}
FUZZ_CC=${CV_FUZZ_CC:-clang-14}

# libFuzzer's own options plus the sanitizers': every report aborts, leaks count.
fuzz_env() {
	printf '%s\n' "ASAN_OPTIONS=abort_on_error=1:detect_leaks=1:allocator_may_return_null=0" \
		"UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"
}

# The reproducers of fuzz/regressions/TARGET/: each must run clean.
replay_regressions() {
	local target=$1
	local dir="fuzz/regressions/${target}" log="${CV_WORK}/replay-${target}.log" rc=0
	local -a files=()
	local f
	if [ -d "${CV_SRC}/${dir}" ]; then
		while IFS= read -r f; do files+=("$f"); done < <(cd "$CV_SRC" && find "$dir" -type f ! -name '*.md' | sort)
	fi
	if [ "${#files[@]}" = 0 ]; then
		cv_tally "${target} (replay)" 1 0 "no reproducers"
		return 0
	fi
	# shellcheck disable=SC2046  # one word per variable
	run_as_pg env $(fuzz_env) "fuzz/build/fuzz_${target}" "${files[@]}" >"$log" 2>&1 || rc=$?
	if [ "$rc" = 0 ]; then
		cv_tally "${target} (replay)" 1 0 "${#files[@]} reproducers"
	else
		cv_header "fuzz_${target}: a reproducer of ${dir} fails again"
		tail -n 60 "$log"
		cv_tally "${target} (replay)" 0 1 "a reproducer of ${dir} fails (status ${rc})"
	fi
}

# Fuzzes TARGET for FUZZ_SECONDS from a scratch copy of its seed corpus.
run_target() {
	local target=$1
	local log="${CV_WORK}/fuzz-${target}.log" rc=0 corpus artifacts f
	corpus="${CV_WORK}/corpus/${target}"
	artifacts="${CV_WORK}/artifacts/${target}"
	run_as_pg -C "$CV_WORK" rm -rf "$corpus" "$artifacts"
	run_as_pg -C "$CV_WORK" mkdir -p "$corpus" "$artifacts"
	if [ -d "${CV_SRC}/fuzz/corpus/${target}" ]; then
		run_as_pg -C "$CV_WORK" cp -r "${CV_SRC}/fuzz/corpus/${target}/." "$corpus/"
	fi
	cv_log "fuzz_${target}: ${FUZZ_SECONDS} s"
	# shellcheck disable=SC2046  # one word per variable
	run_as_pg env $(fuzz_env) "fuzz/build/fuzz_${target}" -max_total_time="$FUZZ_SECONDS" \
		-timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="${artifacts}/" "$corpus" >"$log" 2>&1 || rc=$?
	grep -E '^(stat::number_of_executed_units|stat::new_units_added|#[0-9]+ +DONE)' "$log" || true
	if [ "$rc" = 0 ]; then
		cv_tally "${target} (${FUZZ_SECONDS} s)" 1 0
		return 0
	fi
	cv_header "fuzz_${target} found a failure (status ${rc})"
	grep -v -E '^(#[0-9]+|INFO:|MS:|base unit:|\s+NEW_FUNC)' "$log" | tail -n 80
	for f in "$artifacts"/*; do
		[ -f "$f" ] || continue
		printf '[clustervec] reproducer %s (base64): %s\n' "$f" "$(base64 -w0 "$f")"
	done
	cv_tally "${target} (${FUZZ_SECONDS} s)" 0 1 "see ${artifacts}"
}

main() {
	local started=$SECONDS target jobs=${CV_MAKE_JOBS:-$(cv_cpu_count)}
	local -a targets
	cv_init fuzz 0
	cv_tally_begin "fuzz.sh" fuzz "Fuzzing summary" step
	cv_install_trap
	cv_header "Dependencies"
	install_deps
	command -v "$FUZZ_CC" >/dev/null 2>&1 || cv_die "${FUZZ_CC} not found (install clang and libclang-rt-14-dev)"

	cv_copy_source
	cv_header "Build: make -C fuzz (${FUZZ_CC})"
	if ! run_as_pg make -C fuzz -j"$jobs" FUZZ_CC="$FUZZ_CC" PG_CONFIG="$PG_CONFIG" >"${CV_WORK}/build.log" 2>&1; then
		tail -n 60 "${CV_WORK}/build.log"
		cv_tally "build" 0 1 "make -C fuzz failed"
		cv_tally_end
		exit 1
	fi
	if grep -E 'warning:' "${CV_WORK}/build.log"; then
		cv_warn "the fuzz build has warnings (above)"
	fi
	read -r -a targets <<<"${CV_FUZZ_TARGETS:-$(make -s -C "$CV_SRC/fuzz" print-targets PG_CONFIG="$PG_CONFIG")}"
	for target in "${targets[@]}"; do
		cv_header "fuzz_${target}"
		replay_regressions "$target"
		run_target "$target"
	done
	cv_log "fuzzing took $((SECONDS - started)) s"
	cv_tally_end || exit 1
	exit 0
}

main "$@"
