#!/usr/bin/env python3
"""Label-filtered search on the CPU: cvlattice against a btree on the label.

`WHERE label = $1 ORDER BY v <-> $2 LIMIT 10` answered by a cvlattice index
(v, label) (it reads only that label's list) and by pgvector's only option,
a btree on the label and a top-N sort of the label's rows (the same query
with index scans off: bitmap scan of the btree, heap, sort).  Rows are
clustered points (a centre per label, uniform noise) made in SQL, stored
in a shuffled order (a table clustered by label favours the btree); each
query is a fresh point of a random label.  The lattice is measured without
the btree, the btree without the lattice.  Prints the build times, then p50
latency and QPS of one client for both plans and the plan each used, and
checks that both return the same rows.  Connects with PGHOST/PGPORT/PGUSER/
PGDATABASE.

CV_BENCH_ROWS (100000), CV_BENCH_DIMS (1024), CV_BENCH_LABELS (1000),
CV_BENCH_QUERIES (200), CV_BENCH_SEED (0.25), CV_BENCH_KEEP (1: keep the table).
"""
import os
import statistics
import time

import psycopg2

ROWS = int(os.environ.get("CV_BENCH_ROWS", "100000"))
DIMS = int(os.environ.get("CV_BENCH_DIMS", "1024"))
LABELS = int(os.environ.get("CV_BENCH_LABELS", "1000"))
QUERIES = int(os.environ.get("CV_BENCH_QUERIES", "200"))
SEED = float(os.environ.get("CV_BENCH_SEED", "0.25"))
KEEP = os.environ.get("CV_BENCH_KEEP", "0") == "1"

SEARCH = "SELECT id FROM lat_bench WHERE label = %s ORDER BY v <-> %s::cvec LIMIT 10"


def timed(cur, sql, args=None):
    start = time.perf_counter()
    cur.execute(sql, args)
    return time.perf_counter() - start


def load(cur):
    cur.execute("DROP TABLE IF EXISTS lat_bench, lat_centres")
    cur.execute(f"SELECT setseed({SEED})")
    cur.execute(f"""CREATE TABLE lat_centres AS SELECT c,
        (SELECT array_agg((random() * 20 - 10)::real) FROM generate_series(1, {DIMS}) j
         WHERE c >= 0) AS x FROM generate_series(0, {LABELS - 1}) c""")
    return timed(cur, f"""CREATE TABLE lat_bench AS SELECT i AS id, i % {LABELS} AS label,
        (SELECT array_agg((x[j] + 2 * (random() - 0.5))::real ORDER BY j)
         FROM generate_series(1, {DIMS}) j WHERE i > 0)::cvec({DIMS}) AS v
        FROM generate_series(1, {ROWS}) i JOIN lat_centres ON c = i % {LABELS}
        ORDER BY hashint4(i)""")


def make_queries(cur):
    cur.execute(f"""SELECT (random() * {LABELS - 1})::int AS label,
        (SELECT array_agg((x[j] + 2 * (random() - 0.5))::real ORDER BY j)
         FROM generate_series(1, {DIMS}) j)::cvec::text
        FROM generate_series(1, {QUERIES}) q, LATERAL (SELECT x FROM lat_centres
        WHERE c = (q * 7919) % {LABELS}) s""")
    return cur.fetchall()


def run(cur, queries, settings):
    for setting in settings:
        cur.execute(setting)
    answers, times = [], []
    for label, q in queries[:10]:  # warm-up
        cur.execute(SEARCH, (label, q))
        cur.fetchall()
    for label, q in queries:
        times.append(timed(cur, SEARCH, (label, q)))
        answers.append([r[0] for r in cur.fetchall()])
    cur.execute("RESET ALL")
    return answers, times


def plan(cur, label, q):
    cur.execute("EXPLAIN (COSTS OFF) " + SEARCH, (label, q))
    nodes = [r[0].strip().lstrip("-> ") for r in cur.fetchall()]
    return ", ".join(n for n in nodes
                     if n.split(" ")[0] in ("Sort", "Index", "Bitmap", "Seq") and "Key:" not in n)


def measure(cur, name, queries):
    answers, times = run(cur, queries, [])
    print(f"| {name} | {statistics.median(times) * 1000:.2f} | {len(times) / sum(times):.0f} "
          f"| {plan(cur, *queries[0])} |")
    return answers, times


def main():
    conn = psycopg2.connect("")
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION IF NOT EXISTS clustervec")
    cur.execute("SET maintenance_work_mem = '1GB'")
    load_s = load(cur)
    lattice_s = timed(cur, "CREATE INDEX lat_bench_lattice ON lat_bench USING cvlattice (v, label)")
    seq_s = timed(cur, "SELECT sum(vector_norm(v)) FROM lat_bench")
    cur.execute("VACUUM ANALYZE lat_bench")
    queries = make_queries(cur)
    print(f"{ROWS:,} x {DIMS} in {LABELS:,} labels, {len(queries)} queries, one client\n")
    print("| plan | p50 ms | QPS | nodes |")
    print("|---|---:|---:|---|")
    lattice = measure(cur, "cvlattice (v, label)", queries)
    btree_s = timed(cur, "CREATE INDEX lat_bench_label ON lat_bench (label)")
    cur.execute("DROP INDEX lat_bench_lattice")
    cur.execute("ANALYZE lat_bench")
    btree = measure(cur, "btree (label) + sort", queries)
    same = sum(a == b for a, b in zip(lattice[0], btree[0]))
    ratio = statistics.median(btree[1]) / statistics.median(lattice[1])
    print(f"\nload {load_s:.1f} s; builds: cvlattice {lattice_s:.2f} s, btree {btree_s:.2f} s "
          f"(a sequential scan reading every vector: {seq_s:.2f} s)")
    print(f"cvlattice is {ratio:.1f}x faster at p50; the same rows for {same} of "
          f"{len(queries)} queries")
    if not KEEP:
        cur.execute("DROP TABLE lat_bench, lat_centres")


if __name__ == "__main__":
    main()
