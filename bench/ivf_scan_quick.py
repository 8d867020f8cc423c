#!/usr/bin/env python3
"""Quick side-by-side scan speed: cvivf vs pgvector ivfflat, same lists and probes.

200,000 x 128 pseudo-random rows made in SQL (hashint4), lists = 200, 100
queries drawn from the rows, QPS at probes 10 and 40 after a warm-up of 20
queries.  Connects with PGHOST/PGPORT/PGUSER/PGDATABASE to a server where
clustervec (and, for the second column, pgvector) is installed.
"""
import time

import psycopg2

ROWS, DIMS, LISTS = 200_000, 128, 200

conn = psycopg2.connect("")
conn.autocommit = True
cur = conn.cursor()
cur.execute("CREATE EXTENSION IF NOT EXISTS clustervec")
cur.execute("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'")
have_pgvector = cur.fetchone()[0] > 0
cur.execute("SET maintenance_work_mem = '1GB'")
cur.execute("DROP TABLE IF EXISTS quick_c, quick_v")
cur.execute(f"""CREATE TABLE quick_c AS SELECT i AS id,
    (SELECT array_agg(((hashint4(i * 7 + j) % 1000) / 1000.0)::real ORDER BY j)
     FROM generate_series(1, {DIMS}) j WHERE i > -j)::cvec({DIMS}) AS v
    FROM generate_series(1, {ROWS}) i""")
cur.execute(f"CREATE INDEX ON quick_c USING cvivf (v) WITH (lists = {LISTS})")
cur.execute("VACUUM ANALYZE quick_c")
sides = [("clustervec cvivf", "quick_c", "cvec", "clustervec.probes")]
if have_pgvector:
    cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
    cur.execute(f"CREATE TABLE quick_v AS SELECT id, v::text::vector({DIMS}) AS v FROM quick_c")
    cur.execute(f"CREATE INDEX ON quick_v USING ivfflat (v vector_l2_ops) WITH (lists = {LISTS})")
    cur.execute("VACUUM ANALYZE quick_v")
    sides.append(("pgvector ivfflat", "quick_v", "vector", "ivfflat.probes"))
cur.execute(f"SELECT v::text FROM quick_c WHERE id % {ROWS // 100} = 3 ORDER BY id")
queries = [r[0] for r in cur.fetchall()]
print(f"{ROWS:,} x {DIMS}, lists = {LISTS}, {len(queries)} queries, one client\n")
print("| probes | " + " | ".join(name + " QPS" for name, *_ in sides) + " | ratio |")
print("|---:|" + "---:|" * len(sides) + "---:|")
for probes in (10, 40):
    qps = []
    for name, table, cast, setting in sides:
        cur.execute(f"SET {setting} = {probes}")
        sql = f"SELECT id FROM {table} ORDER BY v <-> %s::{cast} LIMIT 10"
        for q in queries[:20]:
            cur.execute(sql, (q,))
            cur.fetchall()
        start = time.perf_counter()
        for q in queries:
            cur.execute(sql, (q,))
            cur.fetchall()
        qps.append(len(queries) / (time.perf_counter() - start))
    ratio = f"{qps[0] / qps[1]:.2f}x" if len(qps) > 1 else ""
    print(f"| {probes} | " + " | ".join(f"{q:.0f}" for q in qps) + f" | {ratio} |")
cur.execute("DROP TABLE IF EXISTS quick_c, quick_v")
