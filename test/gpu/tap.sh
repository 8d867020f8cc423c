#!/usr/bin/env bash
# test/gpu/tap.sh: build on the GPU machine and run TAP files against the
# real CUDA library, each file REPEAT times (flaky tests show up), logging
# under $OUT.  Each run has its own time limit (TAP_SECONDS, default 240).
#   bash test/gpu/tap.sh REPEAT test/t/103_gpu_crash.pl test/t/106_gpu_mirror_writes.pl
set -uo pipefail
. .gpu/device-env.sh || exit 1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
repeat=${1:?repeat count}; shift
GEN='-gencode arch=compute_90,code=sm_90'
t0=$(date +%s)
{ pgmake CUDA=1 -j16 CUDA_GENCODE="$GEN" && pgmake CUDA=1 install CUDA_GENCODE="$GEN"; } > "$OUT/build.log" 2>&1 \
  || { tail -40 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
for file in "$@"; do
  name=$(basename "$file" .pl)
  for i in $(seq 1 "$repeat"); do
    s=$(date +%s)
    CV_GPU_LIBRARY=clustervec_cuda timeout "${TAP_SECONDS:-240}" \
      bash -c ". .gpu/device-env.sh; pg_prove $file" > "$OUT/$name.$i.log" 2>&1
    rc=$?
    echo "$name run $i: rc=$rc, $(( $(date +%s) - s )) s, $(grep -cE '^ok ' "$OUT/$name.$i.log" || true) ok," \
      "$(grep -cE '^not ok' "$OUT/$name.$i.log" || true) not ok"
    grep -E "^not ok|Failed test|Wstat|died|Dubious" "$OUT/$name.$i.log" | head -5
  done
done
echo "total: $(( $(date +%s) - t0 )) s"
