#!/usr/bin/env bash
# health_sql.sh: build and install clustervec, start a private PostgreSQL
# (port 5494, work folder /var/tmp/clustervec-bench-health) and run
# bench/health_sql.py against it: per-cluster centroids and inertia in plain
# SQL (pgvector's vector and cvec) beside cluster_stats, cluster_health_summary
# and cluster_health on 1,000,000 x 128 rows in 1,000 clusters.  pgvector is
# compared when it is already installed in this PostgreSQL; nothing here
# installs it.  CV_BENCH_* variables (see bench/health_sql.py) pass through.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

cv_init bench-health 5494
install_deps
# build output to stderr: stdout keeps only the table
{ cv_copy_source && cv_build && cv_install; } >&2
# both tables (~0.6 GB each) stay in shared buffers; autovacuum off, so the
# postmaster's reaped children are only the parallel workers (CPU times)
cv_add_conf "shared_buffers = '${CV_BENCH_SHARED_BUFFERS:-2GB}'"
cv_add_conf "max_wal_size = '8GB'"
cv_add_conf "autovacuum = off"
cv_init_cluster >&2 && cv_start_server >&2
CV_PASS_ENV+=(CV_BENCH_ROWS CV_BENCH_DIMS CV_BENCH_CLUSTERS CV_BENCH_REPEATS CV_BENCH_SEED
	CV_BENCH_PGVECTOR CV_BENCH_HEALTH CV_BENCH_HEALTH_MEMORY CV_BENCH_KEEP)
run_as_pg /usr/bin/python3 bench/health_sql.py
