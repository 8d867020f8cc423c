#!/usr/bin/env python3
"""Brute-force ORDER BY embedding <-> q LIMIT 10 over N x D rows, in ms/query.

Loads the same random vectors into a cvec table and, when pgvector is
installed, a vector table (both types share one binary format, so one COPY
stream feeds both), then times each side on the same queries in one run.
Connects through PGHOST/PGPORT/PGUSER/PGDATABASE.  Prints a markdown table.
"""
import io
import os
import struct
import sys
import time

import numpy as np
import psycopg2

ROWS = int(os.environ.get("CV_BENCH_ROWS", 100_000))
DIMS = int(os.environ.get("CV_BENCH_DIMS", 1024))
QUERIES = int(os.environ.get("CV_BENCH_QUERIES", 20))
SEED = int(os.environ.get("CV_BENCH_SEED", 20261130))


def binary_copy_stream(ids, vectors):
    """A COPY ... (FORMAT binary) stream of (bigint, vector) rows."""
    out = io.BytesIO()
    out.write(b"PGCOPY\n\xff\r\n\0" + struct.pack("!ii", 0, 0))
    head = struct.pack("!hiq", 2, 8, 0)[:6]
    body = vectors.astype(">f4")
    size = 4 + 4 * vectors.shape[1]
    for i, row in zip(ids, body):
        out.write(head + struct.pack("!q", int(i)))
        out.write(struct.pack("!ihh", size, vectors.shape[1], 0))
        out.write(row.tobytes())
    out.write(struct.pack("!h", -1))
    out.seek(0)
    return out


def load(cur, table, typename, ids, vectors):
    cur.execute(f"DROP TABLE IF EXISTS {table}")
    cur.execute(f"CREATE TABLE {table} (id bigint, embedding {typename}({vectors.shape[1]}))")
    cur.copy_expert(f"COPY {table} FROM STDIN (FORMAT binary)", binary_copy_stream(ids, vectors))
    cur.execute(f"VACUUM ANALYZE {table}")


def literal(v):
    return "[" + ",".join(repr(float(x)) for x in v) + "]"


def time_queries(cur, table, cast, queries):
    """Runs every query once untimed, then once timed; returns (ms list, id lists)."""
    sql = f"SELECT id FROM {table} ORDER BY embedding <-> %s::{cast} LIMIT 10"
    for q in queries:
        cur.execute(sql, (q,))
        cur.fetchall()
    times, answers = [], []
    for q in queries:
        start = time.perf_counter()
        cur.execute(sql, (q,))
        rows = cur.fetchall()
        times.append((time.perf_counter() - start) * 1000)
        answers.append([r[0] for r in rows])
    return times, answers


def main():
    rng = np.random.default_rng(SEED)
    vectors = rng.standard_normal((ROWS, DIMS), dtype=np.float32)
    queries_np = rng.standard_normal((QUERIES, DIMS), dtype=np.float32)
    queries = [literal(q) for q in queries_np]
    exact = [np.argsort(((vectors.astype(np.float64) - q) ** 2).sum(1), kind="stable")[:10].tolist()
             for q in queries_np.astype(np.float64)]

    conn = psycopg2.connect("")
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION IF NOT EXISTS clustervec")
    cur.execute("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'")
    have_pgvector = cur.fetchone()[0] > 0
    if have_pgvector:
        cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
        cur.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        pgvector_version = cur.fetchone()[0]
    cur.execute("SHOW max_parallel_workers_per_gather")
    workers = cur.fetchone()[0]

    ids = np.arange(ROWS)
    t0 = time.perf_counter()
    load(cur, "bench_cvec", "cvec", ids, vectors)
    print(f"loaded {ROWS} x {DIMS} into cvec in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    if have_pgvector:
        load(cur, "bench_pgvector", "vector", ids, vectors)

    rows = []
    cur.execute("SELECT clustervec_simd()")
    best = cur.fetchone()[0]
    for variant in ("scalar", "avx2", "avx512"):
        try:
            cur.execute(f"SET clustervec.simd = '{variant}'")
        except psycopg2.Error:
            continue
        times, answers = time_queries(cur, "bench_cvec", "cvec", queries)
        rows.append((f"clustervec cvec ({variant})", times, answers))
    cur.execute("RESET clustervec.simd")
    if have_pgvector:
        times, answers = time_queries(cur, "bench_pgvector", "vector", queries)
        rows.append((f"pgvector {pgvector_version} vector", times, answers))

    ours = next(r for r in rows if r[0].endswith(f"({best})"))
    print(f"Brute force `ORDER BY embedding <-> q LIMIT 10`, {ROWS:,} x {DIMS} float4 rows, "
          f"{QUERIES} random queries after one untimed pass, "
          f"max_parallel_workers_per_gather = {workers}, seed {SEED}\n")
    print("| implementation | median ms/query | p90 ms/query | GB/s of vectors | "
          "exact top-10 | time vs clustervec (auto) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, times, answers in rows:
        median = float(np.median(times))
        gbps = ROWS * DIMS * 4 / (median / 1000) / 1e9
        hits = sum(a == e for a, e in zip(answers, exact))
        ratio = median / float(np.median(ours[1]))
        print(f"| {name} | {median:.1f} | {np.percentile(times, 90):.1f} | {gbps:.2f} | "
              f"{hits}/{QUERIES} | {ratio:.2f}x |")
    if not have_pgvector:
        print("\n(pgvector is not installed here: its row is skipped)")


if __name__ == "__main__":
    main()
