#!/usr/bin/env python3
"""Before/after of bench/lattice_cpu.py's label-filtered query, one run.

    python3 bench/lattice_ab.py LIBDIR A.so B.so ...

Against a table bench/lattice_cpu.py left (CV_BENCH_KEEP=1) with a cvlattice
index and the btree on the label: in each of CV_AB_ROUNDS (3) rounds, each
build of clustervec.so named is put in LIBDIR (the server's pkglibdir, by
rename, so running backends keep theirs) and a fresh session times the same
CV_BENCH_QUERIES queries through the cvlattice index as lattice_cpu.py does
(10 untimed first); then the btree + sort plan once (index scans off).
Prints each build's p50 per round and their median, whether its ids equal
the btree plan's, and the plans.  Needs write access to LIBDIR; connects
with PGHOST/PGPORT/PGUSER/PGDATABASE.
"""
import os
import shutil
import statistics
import sys

import psycopg2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lattice_cpu as lc  # noqa: E402

ROUNDS = int(os.environ.get("CV_AB_ROUNDS", "3"))


def install(libdir, so):
    target = os.path.join(libdir, "clustervec.so")
    shutil.copy(so, target + ".tmp")
    os.rename(target + ".tmp", target)


def session():
    conn = psycopg2.connect("")
    conn.autocommit = True
    return conn.cursor()


def main():
    libdir, builds = sys.argv[1], sys.argv[2:]
    cur = session()
    cur.execute("SELECT setseed(0.5)")
    queries = lc.make_queries(cur)
    p50s = {so: [] for so in builds}
    answers = {}
    for _ in range(ROUNDS):
        for so in builds:
            install(libdir, so)
            c = session()
            answers[so], times = lc.run(c, queries, [])
            p50s[so].append(statistics.median(times) * 1000)
            c.connection.close()
    btree, times = lc.run(cur, queries, ["SET enable_indexscan = off"])
    print(f"{len(queries)} queries, {ROUNDS} rounds, one client\n")
    print("| build | p50 ms per round | median | ids as btree + sort |")
    print("|---|---|---:|---:|")
    for so in builds:
        same = sum(a == b for a, b in zip(answers[so], btree))
        print(f"| {os.path.basename(so)} | {' / '.join(f'{x:.2f}' for x in p50s[so])} "
              f"| {statistics.median(p50s[so]):.2f} | {same} of {len(queries)} |")
    print(f"| btree (label) + sort | | {statistics.median(times) * 1000:.2f} | |")
    print("\ncvlattice plan:", lc.plan(cur, *queries[0]))
    cur.execute("SET enable_indexscan = off")
    print("btree plan:", lc.plan(cur, *queries[0]))


if __name__ == "__main__":
    main()
