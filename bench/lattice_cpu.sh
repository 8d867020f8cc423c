#!/usr/bin/env bash
# lattice_cpu.sh: build and install clustervec, start a private PostgreSQL
# (port 5499, work folder /var/tmp/clustervec-bench-lattice) and run
# bench/lattice_cpu.py against it: label-filtered ORDER BY ... LIMIT 10
# through a cvlattice index beside a btree on the label and a sort, on the
# CPU.  CV_BENCH_* variables (see bench/lattice_cpu.py) pass through, e.g.
#   CV_BENCH_ROWS=1000000 CV_BENCH_LABELS=1000 CV_BENCH_LOAD=numpy bash bench/lattice_cpu.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

cv_init bench-lattice 5499
install_deps
# build output to stderr: stdout keeps only the table
{ cv_copy_source && cv_build && cv_install; } >&2
cv_add_conf "shared_buffers = '${CV_BENCH_SHARED_BUFFERS:-2GB}'"
cv_add_conf "max_wal_size = '8GB'"
cv_add_conf "autovacuum = off"
cv_init_cluster >&2 && cv_start_server >&2
CV_PASS_ENV+=(CV_BENCH_ROWS CV_BENCH_DIMS CV_BENCH_LABELS CV_BENCH_QUERIES CV_BENCH_SEED CV_BENCH_LOAD
	CV_BENCH_WARM CV_BENCH_KEEP)
run_as_pg /usr/bin/python3 bench/lattice_cpu.py
