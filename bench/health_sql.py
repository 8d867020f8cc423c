#!/usr/bin/env python3
"""Per-cluster statistics in SQL: plain SQL over pgvector and cvec beside
cluster_stats, cluster_health_summary and cluster_health.

Loads N x D rows in K clusters (default 1,000,000 x 128 in 1,000) into a cvec
table and, when pgvector is available, a vector table (the two types share one
binary format, so one COPY stream feeds both), rows in random cluster order,
then times:

  (a) plain SQL, on pgvector's type and on cvec:
        centroids  SELECT cluster, avg(v) FROM t GROUP BY cluster
        inertia    SELECT t.cluster, sum((t.v <-> c.centroid)^2)
                   FROM t JOIN centroids c USING (cluster) GROUP BY t.cluster
                   (centroids: the table of the centroids query, built untimed)
  (b) SELECT cluster, cluster_stats(v) FROM t GROUP BY cluster
  (c) cluster_health_summary(...) and cluster_health(...) (totals only: the
      per-family split is not visible from SQL)

(a) and (b) run serially (max_parallel_workers_per_gather = 0) and with 2
parallel workers; (c) is PARALLEL RESTRICTED, so serial only, and runs with the default
clustervec.health_memory (256MB: the 1M x 128 sort spills to disk) and again
with CV_BENCH_HEALTH_MEMORY (1GB: it does not).  Each query
runs once untimed (EXPLAIN (ANALYZE, TIMING OFF), which also tells the
workers launched), then CV_BENCH_REPEATS times timed; the table gives the
median wall time and the median CPU time of all the processes involved (the
backend, plus the parallel workers as the postmaster's reaped children, from
/proc: autovacuum must be off for that to be exact), since the machine may
be shared.  Results are checked against each other (centroids, inertia).

Connects through PGHOST/PGPORT/PGUSER/PGDATABASE; prints markdown.

Environment: CV_BENCH_ROWS (1000000), CV_BENCH_DIMS (128), CV_BENCH_CLUSTERS
(1000), CV_BENCH_REPEATS (3), CV_BENCH_SEED (20261201), CV_BENCH_PGVECTOR (0:
skip pgvector), CV_BENCH_HEALTH (0: skip (c)), CV_BENCH_HEALTH_MEMORY (1GB: (c)
again with this clustervec.health_memory, "" to skip), CV_BENCH_KEEP (1: keep
tables).
"""
import os
import re
import statistics
import sys
import time

import numpy as np
import psycopg2

ROWS = int(os.environ.get("CV_BENCH_ROWS", 1_000_000))
DIMS = int(os.environ.get("CV_BENCH_DIMS", 128))
CLUSTERS = int(os.environ.get("CV_BENCH_CLUSTERS", 1000))
REPEATS = int(os.environ.get("CV_BENCH_REPEATS", 3))
SEED = int(os.environ.get("CV_BENCH_SEED", 20261201))
USE_PGVECTOR = os.environ.get("CV_BENCH_PGVECTOR", "1") != "0"
RUN_HEALTH = os.environ.get("CV_BENCH_HEALTH", "1") != "0"
KEEP = os.environ.get("CV_BENCH_KEEP", "0") == "1"
# (c) again with this clustervec.health_memory (room for the whole sort); "" skips it
HEALTH_MEMORY = os.environ.get("CV_BENCH_HEALTH_MEMORY", "1GB")

# The figures for plain SQL over pgvector on 1M x 128 on this machine.
REF_CENTROIDS_S = 1.24
REF_INERTIA_S = 3.2
REF_TOTAL_S = REF_CENTROIDS_S + REF_INERTIA_S

CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(*args):
    print(*args, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# Data and loading
# ---------------------------------------------------------------------------

def make_data(rng):
    """Gaussian clusters around N(0, 1) centres, rows in random order."""
    centres = rng.standard_normal((CLUSTERS, DIMS), dtype=np.float32)
    labels = rng.integers(0, CLUSTERS, ROWS).astype(np.int32)
    vectors = centres[labels]
    vectors += np.float32(0.5) * rng.standard_normal((ROWS, DIMS), dtype=np.float32)
    return labels, vectors


class BytesReader:
    """A file-like object over bytes for copy_expert."""

    def __init__(self, data):
        self.data, self.pos = memoryview(data), 0

    def read(self, size=-1):
        if size < 0:
            size = len(self.data) - self.pos
        chunk = self.data[self.pos:self.pos + size]
        self.pos += len(chunk)
        return chunk.tobytes()

    readline = read


def copy_chunk(ids, labels, vectors):
    """A COPY (FORMAT binary) stream of (bigint, integer, vector) rows, built with numpy."""
    d = vectors.shape[1]
    row = np.dtype([("nfields", ">i2"), ("len_id", ">i4"), ("id", ">i8"),
                    ("len_label", ">i4"), ("label", ">i4"),
                    ("len_v", ">i4"), ("dim", ">i2"), ("unused", ">i2"), ("v", ">f4", (d,))])
    body = np.empty(len(ids), dtype=row)
    body["nfields"] = 3
    body["len_id"] = 8
    body["id"] = ids
    body["len_label"] = 4
    body["label"] = labels
    body["len_v"] = 4 + 4 * d
    body["dim"] = d
    body["unused"] = 0
    body["v"] = vectors
    header = b"PGCOPY\n\xff\r\n\0" + (0).to_bytes(4, "big") + (0).to_bytes(4, "big")
    return header + body.tobytes() + (-1).to_bytes(2, "big", signed=True)


def load(cur, table, typename, labels, vectors):
    cur.execute(f"DROP TABLE IF EXISTS {table}, {table}_centroids")
    cur.execute(f"CREATE TABLE {table} (id bigint, cluster integer, v {typename}({DIMS}))")
    for s in range(0, ROWS, 100_000):
        e = min(ROWS, s + 100_000)
        cur.copy_expert(f"COPY {table} FROM STDIN (FORMAT binary)",
                        BytesReader(copy_chunk(np.arange(s, e), labels[s:e], vectors[s:e])))
    cur.execute(f"VACUUM ANALYZE {table}")


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------

def proc_times(pid):
    """(utime + stime, cutime + cstime) of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is field 3 (state): utime is field 14, cstime field 17
    own = int(fields[11]) + int(fields[12])
    children = int(fields[13]) + int(fields[14])
    return own / CLK_TCK, children / CLK_TCK


class Session:
    def __init__(self):
        self.conn = psycopg2.connect("")
        self.conn.autocommit = True
        self.cur = self.conn.cursor()
        self.cur.execute("SELECT pg_backend_pid()")
        self.backend = self.cur.fetchone()[0]
        with open(f"/proc/{self.backend}/stat") as f:
            self.postmaster = int(f.read().rsplit(")", 1)[1].split()[1])
        self.cpu_readable = True

    def cpu(self):
        """CPU seconds of the backend plus the postmaster's reaped children."""
        try:
            own, _ = proc_times(self.backend)
            _, children = proc_times(self.postmaster)
            return own + children
        except OSError:
            self.cpu_readable = False
            return 0.0

    def workers_launched(self, sql):
        """Runs EXPLAIN (ANALYZE, TIMING OFF) of sql; the parallel workers launched."""
        self.cur.execute(f"EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) {sql}")
        plan = self.cur.fetchone()[0][0]["Plan"]
        launched = 0
        stack = [plan]
        while stack:
            node = stack.pop()
            launched += node.get("Workers Launched", 0)
            stack.extend(node.get("Plans", []))
        return launched

    def time(self, sql):
        """Untimed EXPLAIN ANALYZE, then REPEATS timed runs: (wall, cpu, workers, rows)."""
        workers = self.workers_launched(sql)
        walls, cpus, rows = [], [], None
        for _ in range(REPEATS):
            c0 = self.cpu()
            t0 = time.perf_counter()
            self.cur.execute(sql)
            rows = self.cur.fetchall()
            walls.append(time.perf_counter() - t0)
            cpus.append(self.cpu() - c0)
        log(f"  {' '.join(sql.split())[:90]}: wall {', '.join(f'{w:.2f}' for w in walls)} s")
        return statistics.median(walls), statistics.median(cpus), workers, rows


# ---------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------

def parse_vector(text):
    return np.array([float(x) for x in text.strip("[]").split(",")])


def parse_stats(text):
    """(centroid, inertia) of a cluster_stats_result in text form
    (n,"[centroid]",centroid_norm,inertia,...)."""
    m = re.match(r'^\((\d+),"(\[[^\]]*\])",([^,]*),([^,]*),', text)
    return parse_vector(m.group(2)), float(m.group(4))


def max_rel(a, b):
    """Largest relative difference of two {cluster: value or array} maps."""
    worst = 0.0
    for k, va in a.items():
        vb = b[k]
        scale = max(np.max(np.abs(va)), 1e-30)
        worst = max(worst, float(np.max(np.abs(np.asarray(va) - np.asarray(vb)))) / scale)
    return worst


def main():
    rng = np.random.default_rng(SEED)
    labels, vectors = make_data(rng)

    s = Session()
    cur = s.cur
    cur.execute("CREATE EXTENSION IF NOT EXISTS clustervec")
    cur.execute("SELECT extversion FROM pg_extension WHERE extname = 'clustervec'")
    cv_version = cur.fetchone()[0]
    cur.execute("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'")
    have_pgvector = USE_PGVECTOR and cur.fetchone()[0] > 0
    pgvector_version = None
    if have_pgvector:
        cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
        cur.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        pgvector_version = cur.fetchone()[0]
    cur.execute("SELECT clustervec_simd()")
    simd = cur.fetchone()[0]
    cur.execute("SHOW server_version")
    server_version = cur.fetchone()[0]
    cur.execute("SELECT current_setting('shared_buffers'), current_setting('work_mem'), "
                "current_setting('clustervec.health_memory'), current_setting('autovacuum'), "
                "current_setting('jit')")
    shared_buffers, work_mem, health_memory, autovacuum, jit = cur.fetchone()

    # ground truth in float64
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(CLUSTERS + 1))
    truth_centroid, truth_inertia = {}, {}
    for k in range(CLUSTERS):
        x = vectors[order[bounds[k]:bounds[k + 1]]].astype(np.float64)
        if len(x):
            c = x.mean(0)
            truth_centroid[k] = c
            truth_inertia[k] = float(((x - c) ** 2).sum())

    types = [("cvec", "bench_cvec")]
    if have_pgvector:
        types.insert(0, ("vector", "bench_pgvector"))
    for typename, table in types:
        t0 = time.perf_counter()
        load(cur, table, typename, labels, vectors)
        cur.execute(f"SELECT pg_size_pretty(pg_total_relation_size('{table}'))")
        log(f"loaded {ROWS:,} x {DIMS} into {typename} ({cur.fetchone()[0]}) "
            f"in {time.perf_counter() - t0:.1f} s")
    del vectors

    results = []  # (section, what, type, workers, wall, cpu, launched)
    checks = []

    def add(section, what, typename, workers, sql):
        cur.execute(f"SET max_parallel_workers_per_gather = {workers}")
        wall, cpu, launched, rows = s.time(sql)
        results.append((section, what, typename, workers, wall, cpu, launched))
        return rows

    for workers in (0, 2):
        for typename, table in types:
            cur.execute(f"DROP TABLE IF EXISTS {table}_centroids")
            cur.execute(f"CREATE TABLE {table}_centroids AS "
                        f"SELECT cluster, avg(v) AS centroid FROM {table} GROUP BY cluster")
            cur.execute(f"ANALYZE {table}_centroids")
            rows = add("a", "centroids: `avg(v) GROUP BY cluster`", typename, workers,
                       f"SELECT cluster, avg(v) FROM {table} GROUP BY cluster")
            if workers == 0:
                got = {k: parse_vector(v) for k, v in rows}
                checks.append((f"{typename} avg(v) centroids", max_rel(truth_centroid, got)))
            rows = add("a", "inertia: `sum((v <-> centroid)^2)` join", typename, workers,
                       f"SELECT t.cluster, sum((t.v <-> c.centroid)^2) FROM {table} t "
                       f"JOIN {table}_centroids c USING (cluster) GROUP BY t.cluster")
            if workers == 0:
                got = {k: v for k, v in rows}
                checks.append((f"{typename} plain-SQL inertia", max_rel(truth_inertia, got)))
        rows = add("b", "`cluster_stats(v) GROUP BY cluster`", "cvec", workers,
                   "SELECT cluster, cluster_stats(v) FROM bench_cvec GROUP BY cluster")
        if workers == 0:
            parsed = {k: parse_stats(v) for k, v in rows}
            checks.append(("cluster_stats centroids",
                           max_rel(truth_centroid, {k: v[0] for k, v in parsed.items()})))
            checks.append(("cluster_stats inertia",
                           max_rel(truth_inertia, {k: v[1] for k, v in parsed.items()})))

    if RUN_HEALTH:
        for memory in [None] + ([HEALTH_MEMORY] if HEALTH_MEMORY else []):
            suffix = ""
            if memory:
                cur.execute("SET clustervec.health_memory = %s", (memory,))
                suffix = f", health_memory = {memory}"
            rows = add("c", f"`cluster_health_summary` (pass 1 + neighbour family){suffix}",
                       "cvec", 0,
                       "SELECT * FROM cluster_health_summary('bench_cvec', 'cluster', 'v', "
                       "progress => false)")
            summary = rows[0]
            rows = add("c", f"`cluster_health` (all 38 statistics){suffix}", "cvec", 0,
                       "SELECT * FROM cluster_health('bench_cvec', 'cluster', 'v', "
                       "progress => false)")
            checks.append((f"cluster_health inertia{suffix}",
                           max_rel(truth_inertia, {r[0]: r[3] for r in rows})))
            refused = sum(1 for r in rows if r[38] is None)
            log(f"cluster_health_summary{suffix}: k {summary[0]}, n {summary[1]}, "
                f"davies_bouldin {summary[2]:.4f}, calinski_harabasz {summary[3]:.1f}; "
                f"effective_rank NULL in {refused} clusters")
        cur.execute("RESET clustervec.health_memory")

    if not KEEP:
        for _, table in types:
            cur.execute(f"DROP TABLE IF EXISTS {table}, {table}_centroids")

    # -----------------------------------------------------------------------
    # Report
    # -----------------------------------------------------------------------
    by_key = {(r[1], r[2], r[3]): r for r in results}
    print(f"Per-cluster statistics over {ROWS:,} x {DIMS} float4 rows in {CLUSTERS:,} clusters "
          f"(~{ROWS // CLUSTERS:,} members each, rows in random cluster order), seed {SEED}; "
          f"PostgreSQL {server_version}, clustervec {cv_version} ({simd}), "
          + (f"pgvector {pgvector_version}" if have_pgvector else "pgvector not available")
          + f"; shared_buffers {shared_buffers}, work_mem {work_mem}, "
          f"clustervec.health_memory {health_memory}, autovacuum {autovacuum}, jit {jit}.\n")
    print(f"Wall and CPU: median of {REPEATS} timed runs after one untimed "
          "EXPLAIN ANALYZE run; CPU = backend + parallel workers"
          + ("" if s.cpu_readable else " (NOT AVAILABLE: /proc unreadable)") + ".  "
          "Ratios are wall time against plain SQL over pgvector (centroids + inertia) "
          f"measured here at the same worker setting, and against the issue's "
          f"{REF_TOTAL_S:.2f} s ({REF_CENTROIDS_S} + {REF_INERTIA_S}).\n")
    print("| | query | type | workers (launched) | wall s | CPU s | "
          "vs pgvector centroids + inertia | vs 4.44 s |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    centroid_key = "centroids: `avg(v) GROUP BY cluster`"
    inertia_key = "inertia: `sum((v <-> centroid)^2)` join"
    for section, what, typename, workers, wall, cpu, launched in results:
        base = None
        if have_pgvector:
            w = workers
            a = by_key.get((centroid_key, "vector", w))
            b = by_key.get((inertia_key, "vector", w))
            if a and b:
                base = a[4] + b[4]
        ratio = f"{wall / base:.2f}x" if base else ""
        print(f"| {section} | {what} | {typename} | {workers} ({launched}) | {wall:.2f} | "
              f"{cpu:.2f} | {ratio} | {wall / REF_TOTAL_S:.2f}x |")
    for workers in (0, 2):
        for typename in [t for t, _ in types]:
            a = by_key.get((centroid_key, typename, workers))
            b = by_key.get((inertia_key, typename, workers))
            base = None
            if have_pgvector:
                pa = by_key[(centroid_key, "vector", workers)]
                pb = by_key[(inertia_key, "vector", workers)]
                base = pa[4] + pb[4]
            print(f"| a | centroids + inertia, together | {typename} | {workers} | "
                  f"{a[4] + b[4]:.2f} | {a[5] + b[5]:.2f} | "
                  + (f"{(a[4] + b[4]) / base:.2f}x" if base else "")
                  + f" | {(a[4] + b[4]) / REF_TOTAL_S:.2f}x |")
    print("\nChecks against float64 numpy (largest relative difference over clusters):")
    for name, value in checks:
        print(f"- {name}: {value:.2e}")


if __name__ == "__main__":
    main()
