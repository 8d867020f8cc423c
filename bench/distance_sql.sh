#!/usr/bin/env bash
# distance_sql.sh: build and install clustervec, start a private PostgreSQL
# (port 5496) and run bench/distance_sql.py against it.  pgvector is compared
# when it is already installed in this PostgreSQL; nothing here installs it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

cv_init bench 5496
install_deps
cv_copy_source && cv_build && cv_install
cv_init_cluster && cv_start_server
run_as_pg /usr/bin/python3 bench/distance_sql.py
