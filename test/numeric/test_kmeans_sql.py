#!/usr/bin/python3
"""kmeans() and kmeans_centroids() against scikit-learn and float64 numpy.

Our k-means++ seeds come from the SQL function itself: kmeans_centroids with
iterations => 0 returns them.  scikit-learn's KMeans(init=those seeds,
n_init=1, algorithm="lloyd", tol=0, max_iter=N) then runs the same Lloyd
iterations in float64 as kmeans(..., iterations => N) does; both end with
every row at its nearest final centre, so the inertia (the sum of kmeans'
distance^2) and the labels must agree: inertia to 1e-4 relative (ours keeps
float4 centroids), labels for all but near ties (0.1% of the rows).  The
data are well-separated blobs seeded by k-means++, where no cluster empties
(scikit-learn would refill an empty one by another rule, and the runs would
legitimately part).  kmeans_centroids' members and inertia are also checked
against numpy float64 sums over kmeans' labels and centroids.

Runs against a live server through psycopg2 (PGHOST, PGPORT, PGUSER,
PGDATABASE), with clustervec.gpu as the server has it.  Fresh random inputs
on every run: the seed is printed, and CV_TEST_SEED repeats a run.
    /usr/bin/python3 test/numeric/test_kmeans_sql.py [test_name ...]
Output: "PASS name" / "FAIL name: reason" per test, then "N passed, N failed".
"""

import io
import os
import random
import sys
import traceback
import zlib

import numpy as np
import psycopg2
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs

SEED = int(os.environ.get("CV_TEST_SEED") or random.SystemRandom().randrange(2**32))
TABLE = "cvkmeans_points"
INERTIA_RTOL = 1e-4
LABEL_MISMATCH = 0.001


class TestFailure(AssertionError):
    """A mismatch a test detected (as opposed to an unexpected exception)."""


def check(condition, message):
    if not condition:
        raise TestFailure(message)


def connect():
    conn = psycopg2.connect("")
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("SET client_min_messages = warning")
    return conn


def query(conn, sql, params=None):
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def rng_for(name):
    return np.random.default_rng([SEED, zlib.crc32(name.encode())])


def parse_cvec(text):
    """A cvec's text as its float4 values (the text is the shortest that reads back), in float64."""
    return np.array([np.float32(s) for s in text.strip()[1:-1].split(",")], dtype=np.float32).astype(np.float64)


def load(conn, points, nulls=0):
    """A table of the float4 points (ids from 0) and nulls NULL rows; returns the points as stored."""
    stored = points.astype(np.float32)
    buf = io.StringIO()
    for i, p in enumerate(stored):
        buf.write("%d\t[%s]\n" % (i, ",".join(repr(float(x)) for x in p)))
    for i in range(nulls):
        buf.write("%d\t\\N\n" % (len(stored) + i))
    buf.seek(0)
    with conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS %s; CREATE TABLE %s (id int, v cvec)" % (TABLE, TABLE))
        cur.copy_from(buf, TABLE, columns=("id", "v"))
    return stored.astype(np.float64)


def run_kmeans(conn, k, iterations, seed):
    """(labels by id, distances by id) of kmeans, and kmeans_centroids' rows."""
    rows = query(conn, """SELECT t.id, a.cluster, a.distance FROM kmeans(%%s, 'v', %%s, %%s, %%s) a
                          JOIN %s t ON t.ctid = a.tid ORDER BY t.id""" % TABLE,
                 (TABLE, k, iterations, seed))
    labels = np.array([r[1] for r in rows])
    distances = np.array([r[2] for r in rows])
    centroids = query(conn, "SELECT cluster, centroid::text, members, inertia "
                            "FROM kmeans_centroids(%s, 'v', %s, %s, %s) ORDER BY cluster",
                      (TABLE, k, iterations, seed))
    return labels, distances, centroids


def blobs(rng, n, d, centres):
    x, _ = make_blobs(n_samples=n, n_features=d, centers=centres, cluster_std=1.0,
                      center_box=(-20, 20), random_state=int(rng.integers(2**31)))
    return x


def compare_with_sklearn(conn, points, k, iterations, seed):
    seeds = np.array([parse_cvec(r[1]) for r in run_kmeans(conn, k, 0, seed)[2]])
    check(seeds.shape == (k, points.shape[1]), "expected %d seeds, got %s" % (k, seeds.shape))
    labels, distances, centroids = run_kmeans(conn, k, iterations, seed)
    check(len(labels) == len(points), "kmeans returned %d rows for %d" % (len(labels), len(points)))
    ours = float(np.sum(distances ** 2))
    sk = KMeans(n_clusters=k, init=seeds, n_init=1, algorithm="lloyd", tol=0,
                max_iter=iterations).fit(points)
    check(abs(ours - sk.inertia_) <= INERTIA_RTOL * sk.inertia_,
          "inertia %.10g, scikit-learn %.10g from the same seeds" % (ours, sk.inertia_))
    differ = int(np.sum(labels != sk.labels_))
    check(differ <= LABEL_MISMATCH * len(points),
          "%d of %d labels differ from scikit-learn's" % (differ, len(points)))
    check_sums(points, labels, distances, centroids)
    print("  k=%d iterations=%d: inertia %.10g, scikit-learn %.10g (%d iterations), %d labels differ"
          % (k, iterations, ours, sk.inertia_, sk.n_iter_, differ))


def check_sums(points, labels, distances, centroids):
    """members and inertia: float64 numpy over the labels and the returned centroids."""
    for cluster, text, members, inertia in centroids:
        c = parse_cvec(text)
        mine = points[labels == cluster]
        ref = float(np.sum((mine - c) ** 2))
        check(members == len(mine), "cluster %d: members %d, labels say %d" % (cluster, members, len(mine)))
        check(abs(inertia - ref) <= 1e-9 * max(ref, 1e-300) + 1e-12,
              "cluster %d: inertia %.17g, numpy %.17g" % (cluster, inertia, ref))
        near = np.sqrt(np.sum((mine - c) ** 2, axis=1))
        check(np.allclose(distances[labels == cluster], near, rtol=1e-9, atol=1e-12),
              "cluster %d: distances differ from numpy's" % cluster)


def test_blobs_same_seeds(conn, rng):
    points = load(conn, blobs(rng, 3000, 16, 12), nulls=5)
    compare_with_sklearn(conn, points, 12, 20, int(rng.integers(2**62)))


def test_blobs_more_clusters_than_blobs(conn, rng):
    points = load(conn, blobs(rng, 4000, 8, 10), nulls=0)
    compare_with_sklearn(conn, points, 25, 5, int(rng.integers(2**62)))


def test_one_iteration(conn, rng):
    points = load(conn, blobs(rng, 2000, 32, 20))
    compare_with_sklearn(conn, points, 20, 1, int(rng.integers(2**62)))


def main():
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_")]
    wanted = sys.argv[1:]
    print("seed %d (CV_TEST_SEED=%d repeats this run)" % (SEED, SEED))
    passed = failed = 0
    for name, fn in tests:
        if wanted and name not in wanted:
            continue
        conn = connect()
        try:
            fn(conn, rng_for(name))
            print("PASS %s" % name)
            passed += 1
        except TestFailure as e:
            print("FAIL %s: %s" % (name, e))
            failed += 1
        except Exception:
            print("FAIL %s: %s" % (name, traceback.format_exc().strip().splitlines()[-1]))
            traceback.print_exc()
            failed += 1
        finally:
            try:
                with conn.cursor() as cur:
                    cur.execute("DROP TABLE IF EXISTS %s" % TABLE)
            except psycopg2.Error:
                pass
            conn.close()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
