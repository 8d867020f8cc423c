#!/usr/bin/env bash
# test/gpu/pings.sh: on the GPU machine, round trips through the worker with
# the CUDA library: payloads of 0 bytes, 1 MiB and 64 MiB, from 1 and 16
# sessions (pgbench with per-transaction logs), printed as p50 / p99.
set -uo pipefail
if ! declare -F pgmake >/dev/null; then
  . .gpu/device-env.sh || exit 1
fi
pgmake CUDA=1 -j"$(nproc)" >/tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
pgmake CUDA=1 install >/dev/null 2>&1
pg_start "shared_preload_libraries = 'clustervec'" "max_connections = 100" >/dev/null || exit 1
sleep 3
pg_psql -q -c "CREATE EXTENSION clustervec"
echo "| payload | sessions | requests | p50 us | p99 us | GB/s per session (both ways) |"
echo "|---|---:|---:|---:|---:|---:|"
for bytes in 0 1048576 67108864; do
  for clients in 1 16; do
    dir=$(mktemp -d); chown pg "$dir"
    count=$([ "$bytes" -gt 1048576 ] && echo 50 || echo 10000)
    echo "SELECT clustervec_gpu_ping($bytes);" > "$dir/ping.sql"
    su pg -c "cd $dir && LD_LIBRARY_PATH=/opt/pglibs $PGBIN/pgbench -n -h /tmp/pgsock -p $PGPORT -U pg -c $clients -j $clients -t $count -l --log-prefix=$dir/log -f $dir/ping.sql postgres" >/dev/null 2>&1
    python3 - "$dir" "$bytes" "$clients" <<'PY'
import glob, sys
d, size, clients = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lat = sorted(int(line.split()[2]) for f in glob.glob(d + "/log*") for line in open(f))
p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
rate = "" if size == 0 else "%.1f" % (2 * size / p(0.5) / 1e3)
print("| %s | %d | %d | %d | %d | %s |" % (
    {0: "empty", 1048576: "1 MiB", 67108864: "64 MiB"}[size], clients, len(lat), p(0.5), p(0.99), rate))
PY
    rm -rf "$dir"
  done
done
echo "(latencies are whole SQL statements measured by pgbench: parse, execute, the round trip through the worker)"
pg_stop >/dev/null
