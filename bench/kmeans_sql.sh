#!/usr/bin/env bash
# bench/kmeans_sql.sh: kmeans() and kmeans_centroids() through SQL on the GPU
# machine (after `. .gpu/device-env.sh`, `pgmake CUDA=1 install` and
# `pg_start "shared_preload_libraries = 'clustervec'" ...`, as
# test/gpu/all.sh does):
#
#   bash bench/kmeans_sql.sh ROWS DIMS CLUSTERS K [ITERATIONS] [CPU_ROWS]
#
# Loads ROWS x DIMS clustered vectors, times kmeans_centroids on the GPU
# over all rows, then the GPU and the CPU side by side on the first
# CPU_ROWS rows (the CPU k-means is one process), with how far their
# answers agree (rows in the same cluster, relative inertia difference).
set -uo pipefail
rows=${1:-1000000}; dims=${2:-128}; clusters=${3:-1000}; k=${4:-1024}
iters=${5:-10}; cpu_rows=${6:-100000}
declare -F pg_psql >/dev/null || . .gpu/device-env.sh
q() { pg_psql -X -q -At "$@"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

echo "== data: $rows x $dims, $clusters clusters"
"${PYTHON:-python3}" bench/gpu_data.py "$rows" "$dims" "$clusters" 4 /tmp/cvkm || exit 1
chmod a+r /tmp/cvkm.*
q -c "CREATE TABLE items (id int8, c int4, v cvec($dims))"
for p in 0 1 2 3; do q -c "COPY items FROM '/tmp/cvkm.$p' WITH (FORMAT binary)" & done; wait
q -c "VACUUM ANALYZE items"
q -c "CREATE TABLE sub AS SELECT * FROM items ORDER BY id LIMIT $cpu_rows"
q -c "VACUUM ANALYZE sub"

echo "== kmeans_centroids on the GPU: $rows x $dims, k = $k, $iters iterations"
t=$(now)
q -c "SET clustervec.gpu = require; CREATE TABLE gpu_all AS SELECT * FROM kmeans_centroids('items', 'v', $k, $iters)"
echo "GPU, all rows: $(since "$t") s; clusters $(q -c 'SELECT count(*) FROM gpu_all'), inertia $(q -c 'SELECT round(sum(inertia)::numeric, 1) FROM gpu_all')"

echo "== side by side on $cpu_rows rows"
t=$(now)
q -c "SET clustervec.gpu = require; CREATE TABLE gpu_sub AS SELECT * FROM kmeans('sub', 'v', $k, $iters)"
gpu_s=$(since "$t")
t=$(now)
q -c "SET clustervec.gpu = off; CREATE TABLE cpu_sub AS SELECT * FROM kmeans('sub', 'v', $k, $iters)"
cpu_s=$(since "$t")
echo "| rows | k | iterations | GPU s | CPU s (one process) | CPU / GPU | same cluster | inertia GPU / CPU |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
agree=$(q -c "SELECT round(avg((g.cluster = c.cluster)::int)::numeric, 4) FROM gpu_sub g JOIN cpu_sub c USING (tid)")
ratio=$(q -c "SELECT round(((SELECT sum(distance^2) FROM gpu_sub) / (SELECT sum(distance^2) FROM cpu_sub))::numeric, 6)")
echo "| $cpu_rows | $k | $iters | $gpu_s | $cpu_s | $(awk -v a="$cpu_s" -v b="$gpu_s" 'BEGIN { printf "%.1fx", a / b }') | $agree | $ratio |"
