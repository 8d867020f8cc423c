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
CV_BENCH_QUERIES (200), CV_BENCH_SEED (0.25), CV_BENCH_KEEP (1: keep the table),
CV_BENCH_LOAD (sql, or numpy: the same distribution drawn by numpy and sent
by binary COPY, minutes faster at 1M rows; the centres and queries stay SQL's),
CV_BENCH_WARM (0: 10 untimed queries before each plan's timed ones; 1: every
query once untimed, so the timed pass reads lists and rows already in shared
buffers: a server whose working set fits in memory.  At 1M rows the index
and table outgrow the page cache left beside shared_buffers here, and a
label's first query after the build reads its list from disk).
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
LOAD = os.environ.get("CV_BENCH_LOAD", "sql")
WARM = os.environ.get("CV_BENCH_WARM", "0") == "1"

SEARCH = "SELECT id FROM lat_bench WHERE label = %s ORDER BY v <-> %s::cvec LIMIT 10"


def timed(cur, sql, args=None):
    start = time.perf_counter()
    cur.execute(sql, args)
    return time.perf_counter() - start


class CopyRows:
    """lat_bench's rows as a binary COPY stream, made chunk by chunk as read."""

    def __init__(self, centres):
        import numpy as np
        self.np = np
        self.centres = centres
        self.rng = np.random.default_rng(int(SEED * 2**32))
        self.ids = self.rng.permutation(ROWS) + 1  # stored shuffled, as the SQL load
        self.record = np.dtype([("fields", ">i2"), ("l1", ">i4"), ("id", ">i4"), ("l2", ">i4"),
                                ("label", ">i4"), ("l3", ">i4"), ("dim", ">i2"),
                                ("unused", ">i2"), ("x", ">f4", (DIMS,))])
        self.done = 0
        self.pending = b"PGCOPY\n\xff\r\n\x00" + b"\x00" * 8
        self.at = 0

    def chunk(self):
        np = self.np
        ids = self.ids[self.done:self.done + 10000]
        self.done += len(ids)
        if len(ids) == 0:
            return b""
        buf = np.zeros(len(ids), dtype=self.record)
        buf["fields"], buf["l1"], buf["l2"], buf["l3"] = 3, 4, 4, 4 + 4 * DIMS
        buf["id"], buf["label"], buf["dim"] = ids, ids % LABELS, DIMS
        noise = self.rng.uniform(-1, 1, (len(ids), DIMS)).astype(np.float32)
        buf["x"] = self.centres[ids % LABELS] + noise
        return buf.tobytes() + (b"\xff\xff" if self.done == ROWS else b"")

    def read(self, size=-1):
        if self.at == len(self.pending):
            self.pending, self.at = self.chunk(), 0
        end = len(self.pending) if size < 0 else min(len(self.pending), self.at + size)
        out, self.at = self.pending[self.at:end], end
        return out


def load_numpy(cur):
    import numpy as np
    cur.execute("SELECT x FROM lat_centres ORDER BY c")
    centres = np.array([r[0] for r in cur.fetchall()], dtype=np.float32)
    start = time.perf_counter()
    # one transaction: under wal_level = minimal the COPY writes no WAL
    cur.execute("BEGIN")
    cur.execute(f"CREATE TABLE lat_bench (id int, label int, v cvec({DIMS}))")
    cur.copy_expert("COPY lat_bench FROM STDIN WITH (FORMAT binary)", CopyRows(centres), size=1 << 20)
    cur.execute("COMMIT")
    return time.perf_counter() - start


def load(cur):
    cur.execute("DROP TABLE IF EXISTS lat_bench, lat_centres")
    cur.execute(f"SELECT setseed({SEED})")
    cur.execute(f"""CREATE TABLE lat_centres AS SELECT c,
        (SELECT array_agg((random() * 20 - 10)::real) FROM generate_series(1, {DIMS}) j
         WHERE c >= 0) AS x FROM generate_series(0, {LABELS - 1}) c""")
    if LOAD == "numpy":
        return load_numpy(cur)
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
    for label, q in (queries if WARM else queries[:10]):  # warm-up
        cur.execute(SEARCH, (label, q))
        cur.fetchall()
    for label, q in queries:
        times.append(timed(cur, SEARCH, (label, q)))
        answers.append([r[0] for r in cur.fetchall()])
    cur.execute("RESET ALL")
    return answers, times


def vector_only(cur, queries):
    """p50 of sending and parsing the query vector alone: what both plans pay before planning."""
    times = [timed(cur, "SELECT %s::cvec IS NULL", (q,)) for _, q in queries]
    return statistics.median(times) * 1000


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
    literal_ms = vector_only(cur, queries)
    same = sum(a == b for a, b in zip(lattice[0], btree[0]))
    ratio = statistics.median(btree[1]) / statistics.median(lattice[1])
    print(f"\nload {load_s:.1f} s; builds: cvlattice {lattice_s:.2f} s, btree {btree_s:.2f} s "
          f"(a sequential scan reading every vector: {seq_s:.2f} s)")
    print(f"cvlattice is {ratio:.1f}x faster at p50; the same rows for {same} of "
          f"{len(queries)} queries")
    print(f"of each query, {literal_ms:.2f} ms p50 is sending and parsing the vector literal "
          f"alone (SELECT $1::cvec IS NULL)")
    if not KEEP:
        cur.execute("DROP TABLE lat_bench, lat_centres")


if __name__ == "__main__":
    main()
