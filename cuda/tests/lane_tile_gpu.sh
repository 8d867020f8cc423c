#!/usr/bin/env bash
# lane_tile_gpu.sh: the H200 check of a change to the float64 lane tile
# (cuda/lane_tile.cuh) in one device call: the tests that cover its three
# users (knn_test, kmeans_test, ivf_search_test, each bit for bit against
# src/math) against the library before and after the change, and
# lane_tile_bench on both, whose output hashes must agree with each other
# and, at --small sizes, with the CPU shim's.
#
# Everything is built here (nvcc 13.0 and gcc make x86-64 code that runs
# there), so the device time goes to running only:
#   bash cuda/tests/lane_tile_gpu.sh prepare BEFORE_REV DIR   # here
#   bash DIR/lane_tile_gpu.sh run DIR                          # there; logs in $OUT
# DIR must travel with the device call (an ignored folder of the checkout
# that is sent, named in carry; .gpu/ is ignored).
set -uo pipefail

prepare() {
	local rev=$1 dir=$2 old
	old=$(mktemp -d)
	mkdir -p "$dir/before" "$dir/after"
	make -f cuda/standalone.mk -j"$(nproc)" all cputest-programs >"$dir/build.log" 2>&1 \
		|| { tail -20 "$dir/build.log"; return 1; }
	git archive "$rev" cuda src | tar -x -C "$old"
	# BEFORE_REV's library: the objects of the files the change left alone
	# are reused (copied, so newer than their sources); make builds the rest
	for cu in cuda/*.cu; do
		if cmp -s "$cu" "$old/$cu" && ! grep -q lane_tile.cuh "$cu"; then
			cp "${cu%.cu}.cuda.o" "$old/cuda/"
		fi
	done
	(cd "$old" && make -f cuda/standalone.mk cuda/clustervec_cuda.so) >>"$dir/build.log" 2>&1 \
		|| { tail -20 "$dir/build.log"; return 1; }
	cp "$old/cuda/clustervec_cuda.so" "$dir/before/"
	cp cuda/clustervec_cuda.so "$dir/after/"
	cp cuda/clustervec_cuda_cpu.so cuda/tests/knn_test cuda/tests/kmeans_test \
		cuda/tests/ivf_search_test cuda/tests/lane_tile_gpu.sh "$dir/"
	gcc -O2 -Wall -Wextra -Icuda/include -Icuda -Isrc cuda/tests/lane_tile_bench.c \
		-o "$dir/lane_tile_bench" -ldl -lm || return 1
	grep -i warning "$dir/build.log" | head -5
	rm -rf "$old"
	du -sh "$dir"
}

# Logs: tests.<build>.log, bench.log, small.log under $OUT (at most 8 files
# come back from a device call).
run() {
	local dir=$1 t v b round lib
	OUT=${OUT:-/tmp/out}
	mkdir -p "$OUT"
	nvidia-smi -L
	for v in after before; do
		for t in knn_test kmeans_test ivf_search_test; do
			echo "=== $t" >>"$OUT/tests.$v.log"
			timeout 150 "$dir/$t" "$dir/$v/clustervec_cuda.so" --require-device --seed 19 \
				>"$OUT/$t.tmp" 2>&1
			echo "$v $t rc=$? $(tail -1 "$OUT/$t.tmp")"
			grep -E "^FAILED" "$OUT/$t.tmp" | head -3
			cat "$OUT/$t.tmp" >>"$OUT/tests.$v.log" && rm "$OUT/$t.tmp"
		done
		[ "$v" = after ] || continue
		# speed, alternating builds so that drift hits both alike
		for round in 1 2; do
			for b in before after; do
				echo "== $b, round $round" | tee -a "$OUT/bench.log"
				timeout 120 "$dir/lane_tile_bench" "$dir/$b/clustervec_cuda.so" \
					| tee -a "$OUT/bench.log" | tee "/tmp/bench.$b.$round"
			done
			diff <(awk 'NR > 2 {print $NF}' "/tmp/bench.before.$round") \
				<(awk 'NR > 2 {print $NF}' "/tmp/bench.after.$round") >/dev/null \
				&& echo "bench round $round: before and after output hashes equal" \
				|| echo "bench round $round: output hashes DIFFER"
		done
	done
	for b in cpu before after; do
		lib=$dir/$b/clustervec_cuda.so
		[ "$b" = cpu ] && lib=$dir/clustervec_cuda_cpu.so
		echo "== $b --small" >>"$OUT/small.log"
		timeout 60 "$dir/lane_tile_bench" "$lib" --small | tee -a "$OUT/small.log" |
			awk 'NR > 2 {print $NF}' >"/tmp/small.$b"
	done
	cmp -s /tmp/small.cpu /tmp/small.before && cmp -s /tmp/small.cpu /tmp/small.after \
		&& echo "small sizes: before, after and CPU shim output hashes equal" \
		|| echo "small sizes: output hashes DIFFER (small.log)"
}

case ${1:-} in
	prepare) prepare "$2" "$3" ;;
	run) run "$2" ;;
	*) echo "usage: $0 prepare BEFORE_REV DIR | run DIR" >&2; exit 2 ;;
esac
