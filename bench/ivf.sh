#!/usr/bin/env bash
# ivf.sh: build and install clustervec, start a private PostgreSQL (port 5495)
# and run bench/ivf.py against it: cvivf beside pgvector's ivfflat and hnsw
# (build time and phases, index size, recall@10, QPS).  pgvector is compared
# when it is already installed in this PostgreSQL; nothing here installs it.
# CV_BENCH_* variables (see bench/ivf.py) pass through, e.g.
#   CV_BENCH_SCALE=0.1 CV_BENCH_SETS=synth128,fashion bash bench/ivf.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

cv_init bench-ivf 5495
# build and server output to stderr: stdout keeps only the tables
{ install_deps && cv_copy_source && cv_build && cv_install; } >&2
# room for the indexes being compared (the 1M x 128 tables are ~600 MB each)
cv_add_conf "shared_buffers = '${CV_BENCH_SHARED_BUFFERS:-4GB}'"
cv_add_conf "max_wal_size = '8GB'"
{ cv_init_cluster && cv_start_server; } >&2
CV_PASS_ENV+=(CV_BENCH_SETS CV_BENCH_SCALE CV_BENCH_QUERIES CV_BENCH_PROBES CV_BENCH_EF
	CV_BENCH_LISTS_SYNTH128 CV_BENCH_LISTS_SYNTH1024 CV_BENCH_LISTS_FASHION
	CV_BENCH_HNSW_MAX_ROWS CV_BENCH_HNSW_TIMEOUT CV_BENCH_PGVECTOR CV_BENCH_IVFFLAT CV_BENCH_HNSW
	CV_BENCH_PASSES CV_BENCH_CLIENTS CV_BENCH_QUANT CV_BENCH_SEED CV_BENCH_FASHION_DIR CV_BENCH_JSON CV_BENCH_KEEP)
run_as_pg /usr/bin/python3 bench/ivf.py
