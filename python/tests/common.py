"""Shared helpers of the clustervec Python client tests.

The tests run against a live server with the clustervec extension available:
libpq's environment (PGHOST, PGPORT, PGUSER, PGDATABASE) says which, as for
test/numeric (scripts/test.sh sets them, PGDATABASE from CV_PGDATABASE).
CV_TEST_SEED fixes the random numbers; the seed is printed by run.py.
"""

import os
import random
import zlib

import numpy as np

SEED = int(os.environ.get("CV_TEST_SEED") or random.SystemRandom().randrange(2**32))
PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PREFIX = "cvpy_"
FLT_MAX = np.finfo(np.float32).max
FLT_TINY = np.finfo(np.float32).tiny                       # smallest normal
FLT_SUB = np.float32(1.401298464324817e-45)                # smallest subnormal
SPECIALS = np.array([0.0, -0.0, FLT_MAX, -FLT_MAX, FLT_TINY, -FLT_TINY, FLT_SUB, -FLT_SUB,
                     0.1, 1.0 / 3.0, 1e-38, 16777217.0], dtype=np.float32)


def rng_for(name):
    """A generator for one test, from the run's seed and the test's name, so
    that a test rerun alone sees the same numbers."""
    return np.random.default_rng([SEED, zlib.crc32(name.encode())])


def random_vector(rng, dim):
    """A float32 vector mixing every kind of finite float32: random bit
    patterns (all exponents, subnormals), Gaussian values, small integers
    and the SPECIALS (±0, ±FLT_MAX, the smallest normals and subnormals)."""
    bits = rng.integers(0, 2**32, size=dim, dtype=np.uint64).astype(np.uint32)
    v = bits.view(np.float32).copy()
    kind = rng.integers(0, 4, size=dim)
    v[kind == 1] = rng.normal(size=int(np.sum(kind == 1))).astype(np.float32)
    v[kind == 2] = rng.integers(-1000, 1000, size=int(np.sum(kind == 2))).astype(np.float32)
    v[kind == 3] = SPECIALS[rng.integers(0, SPECIALS.size, size=int(np.sum(kind == 3)))]
    bad = ~np.isfinite(v)
    v[bad] = rng.normal(size=int(np.sum(bad))).astype(np.float32)
    return v


def same_bits(a, b):
    a = np.asarray(a)
    b = np.asarray(b)
    return (a.dtype == np.float32 and b.dtype == np.float32 and a.shape == b.shape
            and np.array_equal(a.view(np.uint32), b.view(np.uint32)))


def first_difference(a, b):
    """Where two float32 arrays first differ, for a failure message."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return "shape/dtype %s %s vs %s %s" % (a.shape, a.dtype, b.shape, b.dtype)
    diff = np.nonzero(a.view(np.uint32) != b.view(np.uint32))[0]
    if diff.size == 0:
        return "no difference"
    i = int(diff[0])
    return "%d elements differ; first at %d: %r vs %r" % (diff.size, i, a[i], b[i])


def connect3():
    import psycopg
    return psycopg.connect("", autocommit=True)


def connect2():
    import psycopg2
    conn = psycopg2.connect("")
    conn.autocommit = True
    return conn


def demo_data(rng, rows=1500, clusters=12, dim=16):
    """Demo-like data (scripts/demo.sh's recipe, smaller): centres uniform in
    [-1, 1]^dim, skewed cluster sizes, members = centre + uniform noise in
    [-0.15, 0.15].  Returns (labels int array, vectors float32 array)."""
    centres = rng.uniform(-1, 1, size=(clusters, dim))
    labels = np.minimum((rng.random(rows) ** 1.6 * clusters).astype(np.int64), clusters - 1)
    vectors = (centres[labels] + 0.3 * (rng.random((rows, dim)) - 0.5)).astype(np.float32)
    return labels, vectors


def load_table(conn3, table, labels, vectors, label_type="int4"):
    """CREATE TABLE table (id, cluster, embedding) and load it with binary
    COPY through the psycopg 3 adapters (which this exercises too)."""
    import clustervec
    clustervec.register(conn3)
    dim = vectors.shape[1] if len(vectors) else 4
    conn3.execute("DROP TABLE IF EXISTS %s" % table)
    conn3.execute("CREATE TABLE %s (id int8, cluster %s, embedding cvec(%d))" % (table, label_type, dim))
    with conn3.cursor() as cur:
        with cur.copy("COPY %s (id, cluster, embedding) FROM STDIN WITH (FORMAT BINARY)" % table) as copy:
            copy.set_types(["int8", label_type, "cvec"])
            for i, (label, vector) in enumerate(zip(labels, vectors)):
                copy.write_row((i, label.item() if hasattr(label, "item") else label, vector))
