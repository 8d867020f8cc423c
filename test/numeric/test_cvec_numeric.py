#!/usr/bin/python3
"""Numeric equivalence of the cvec type against float64 numpy.

Runs against a live server through psycopg2; libpq reads PGHOST, PGPORT,
PGUSER and PGDATABASE (scripts/test.sh sets them).  Inputs are fresh random
numbers on every run: the seed is printed, and CV_TEST_SEED repeats a run.

Every test_* function runs on its own connection with its own generator
(seeded from the run seed and the test's name), so a test can be rerun alone:
    /usr/bin/python3 test/numeric/test_cvec_numeric.py [test_name ...]
Output: "PASS name" / "FAIL name: reason" per test, then "N passed, N failed".
"""

import decimal
import fractions
import io
import json
import os
import random
import sys
import time
import traceback
import zlib

import numpy as np
import psycopg2

DIMS = (1, 3, 17, 1023, 1024, 16000)
SIMD_VALUES = ("scalar", "avx2", "avx512", "auto")
TABLE_PREFIX = "cvnum_"

SEED = int(os.environ.get("CV_TEST_SEED") or random.SystemRandom().randrange(2**32))


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

class TestFailure(AssertionError):
    """A mismatch a test detected (as opposed to an unexpected exception)."""


def check(condition, message):
    if not condition:
        raise TestFailure(message)


def connect():
    conn = psycopg2.connect("")
    conn.autocommit = True
    return conn


def query(conn, sql, params=None):
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall() if cur.description is not None else None


def query_one(conn, sql, params=None):
    rows = query(conn, sql, params)
    check(rows is not None and len(rows) == 1, "expected one row from: %s" % sql[:200])
    return rows[0]


def rng_for(name):
    return np.random.default_rng([SEED, zlib.crc32(name.encode())])


def f32_text(values):
    """A float32 array as cvec text, each element the shortest repr."""
    return "[" + ",".join(str(np.float32(v)) for v in values) + "]"


def f32_array_text(values):
    return "{" + ",".join(str(np.float32(v)) for v in values) + "}"


def _nearest_f32_exact(text):
    """The float32 nearest the decimal text, ties to even, exactly."""
    exact = fractions.Fraction(text)
    f = np.float32(float(exact))
    candidates = [f, np.nextafter(f, np.float32(np.inf)), np.nextafter(f, np.float32(-np.inf))]
    best = min(candidates, key=lambda c: (abs(fractions.Fraction(float(c)) - exact),
                                          int(np.array(c).view(np.uint32)) & 1))
    return best


def parse_f32_list(items):
    """Decimal strings to float32, correctly rounded (no double rounding).

    Parsing to float64 first is exact unless the double lands exactly on a
    float32 midpoint; those rare elements are resolved with exact rationals.
    """
    d = np.array([float(s) for s in items], dtype=np.float64)
    f = d.astype(np.float32)
    lo = f.astype(np.float64)
    toward = np.where(d > lo, np.float32(np.inf), np.float32(-np.inf)).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        step = np.abs(np.nextafter(f, toward).astype(np.float64) - lo)
    ambiguous = np.nonzero((d != lo) & (np.abs(d - lo) * 2 == step))[0]
    for i in ambiguous:
        f[i] = _nearest_f32_exact(items[i].strip())
    return f


def parse_cvec(text):
    text = text.strip()
    check(text.startswith("[") and text.endswith("]"), "not a cvec text: %r" % text[:80])
    body = text[1:-1].strip()
    if not body:
        return np.zeros(0, dtype=np.float32)
    return parse_f32_list(body.split(","))


def parse_real_array(text):
    text = text.strip()
    check(text.startswith("{") and text.endswith("}"), "not an array text: %r" % text[:80])
    body = text[1:-1].strip()
    if not body:
        return np.zeros(0, dtype=np.float32)
    return parse_f32_list(body.split(","))


def bits(a):
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def assert_bits_equal(got, expected, what):
    got = np.asarray(got, dtype=np.float32)
    expected = np.asarray(expected, dtype=np.float32)
    check(got.shape == expected.shape, "%s: shape %s, expected %s" % (what, got.shape, expected.shape))
    diff = np.nonzero(bits(got) != bits(expected))[0]
    if len(diff):
        i = diff[0]
        raise TestFailure("%s: %d of %d elements differ; first at %d: got %r, expected %r"
                          % (what, len(diff), len(got), i, got[i], expected[i]))


def random_vector(rng, dim, kind):
    """float32 test vectors: 'normal' N(0,1), 'mixed' magnitudes 1e-3..1e3, 'positive'."""
    if kind == "normal":
        v = rng.standard_normal(dim)
    elif kind == "mixed":
        v = rng.standard_normal(dim) * 10.0 ** rng.uniform(-3, 3, dim)
    elif kind == "positive":
        v = rng.uniform(0.01, 2.0, dim)
    else:
        raise ValueError(kind)
    return v.astype(np.float32)


def supported_simd(conn):
    """The clustervec.simd values this CPU accepts; fails on unexpected errors."""
    ok = []
    # before clustervec is loaded in a session its settings are placeholders
    # that accept any value: load it, so SET checks what this CPU supports
    query(conn, "SELECT clustervec_simd()")
    for value in SIMD_VALUES:
        try:
            query(conn, "SET clustervec.simd = %s", (value,))
            ok.append(value)
        except psycopg2.Error as e:
            text = " ".join(x for x in (e.pgerror, getattr(e.diag, "message_detail", None),
                                        getattr(e.diag, "message_hint", None)) if x)
            if "support" not in text.lower():
                raise TestFailure("SET clustervec.simd = %s failed: %s" % (value, text.strip()))
    query(conn, "RESET clustervec.simd")
    check("scalar" in ok and "auto" in ok, "scalar and auto must always be accepted, got %s" % ok)
    return ok


def set_simd(conn, value):
    query(conn, "SET clustervec.simd = %s", (value,))


def reference_distances(a, b):
    a64 = a.astype(np.float64)
    b64 = b.astype(np.float64)
    dot = float(np.dot(a64, b64))
    na = float(np.sqrt(np.dot(a64, a64)))
    nb = float(np.sqrt(np.dot(b64, b64)))
    return {
        "l2": float(np.sqrt(np.sum((a64 - b64) ** 2))),
        "ip": dot,
        "ip_scale": float(np.sum(np.abs(a64 * b64))),
        "cos": 1.0 - dot / (na * nb),
        "l1": float(np.sum(np.abs(a64 - b64))),
        "norm_a": na,
        "norm_b": nb,
    }


DISTANCE_SQL = """
SELECT a <-> b, a <#> b, a <=> b, a <+> b,
       inner_product(a, b), l2_distance(a, b), cosine_distance(a, b), l1_distance(a, b),
       vector_norm(a), vector_norm(b), vector_dims(a)
FROM (SELECT %s::cvec AS a, %s::cvec AS b) s
"""
DISTANCE_NAMES = ("<->", "<#>", "<=>", "<+>", "inner_product", "l2_distance",
                  "cosine_distance", "l1_distance", "vector_norm(a)", "vector_norm(b)")


def check_distances(row, ref, dim, label):
    (l2op, nipop, cosop, l1op, ip, l2, cos, l1, na, nb, dims) = row
    check(dims == dim, "%s: vector_dims %r, expected %d" % (label, dims, dim))

    def rel(name, got, exp):
        check(got is not None and abs(got - exp) <= 1e-6 * abs(exp) + 1e-300,
              "%s: %s = %r, numpy %r (rel err %.3g > 1e-6)"
              % (label, name, got, exp, abs(got - exp) / abs(exp) if exp else float("inf")))

    rel("<->", l2op, ref["l2"])
    rel("l2_distance", l2, ref["l2"])
    rel("<+>", l1op, ref["l1"])
    rel("l1_distance", l1, ref["l1"])
    rel("vector_norm(a)", na, ref["norm_a"])
    rel("vector_norm(b)", nb, ref["norm_b"])
    tol = 1e-6 * ref["ip_scale"]
    check(abs(ip - ref["ip"]) <= tol,
          "%s: inner_product = %r, numpy %r (|err| %.3g > %.3g)" % (label, ip, ref["ip"], abs(ip - ref["ip"]), tol))
    check(abs(-nipop - ref["ip"]) <= tol,
          "%s: <#> = %r, numpy %r (|err| %.3g > %.3g)" % (label, nipop, -ref["ip"], abs(-nipop - ref["ip"]), tol))
    for name, got in (("<=>", cosop), ("cosine_distance", cos)):
        check(abs(got - ref["cos"]) <= 1e-6,
              "%s: %s = %r, numpy %r (|err| %.3g > 1e-6)" % (label, name, got, ref["cos"], abs(got - ref["cos"])))


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------

def test_simd_settings(conn, rng):
    ok = supported_simd(conn)
    print("    clustervec.simd values accepted here: %s" % ", ".join(ok))
    for value in ok:
        set_simd(conn, value)
        (name,) = query_one(conn, "SELECT clustervec_simd()")
        if value != "auto":
            check(name == value, "SET clustervec.simd = %s but clustervec_simd() = %r" % (value, name))


def test_distances_vs_numpy_and_across_simd(conn, rng):
    simd = supported_simd(conn)
    for dim in DIMS:
        for kind_a, kind_b in (("normal", "normal"), ("mixed", "mixed"), ("positive", "mixed")):
            a = random_vector(rng, dim, kind_a)
            b = random_vector(rng, dim, kind_b)
            ref = reference_distances(a, b)
            ta, tb = f32_text(a), f32_text(b)
            results = {}
            for value in simd:
                set_simd(conn, value)
                row = query_one(conn, DISTANCE_SQL, (ta, tb))
                label = "dim %d %s/%s simd=%s" % (dim, kind_a, kind_b, value)
                check_distances(row, ref, dim, label)
                results[value] = row
            first = simd[0]
            for value in simd[1:]:
                for name, x, y in zip(DISTANCE_NAMES, results[first], results[value]):
                    check(x == y or (x != x and y != y),
                          "dim %d %s/%s: %s differs between simd=%s (%r) and simd=%s (%r)"
                          % (dim, kind_a, kind_b, name, first, x, value, y))


def test_same_vector_and_zero_vector(conn, rng):
    simd = supported_simd(conn)
    for dim in DIMS:
        a = random_vector(rng, dim, "normal")
        zero = np.zeros(dim, dtype=np.float32)
        for value in simd:
            set_simd(conn, value)
            l2, l1, cos_self, cos_zero, norm_zero = query_one(
                conn, "SELECT a <-> a, a <+> a, a <=> a, a <=> z, vector_norm(z) "
                      "FROM (SELECT %s::cvec a, %s::cvec z) s", (f32_text(a), f32_text(zero)))
            label = "dim %d simd=%s" % (dim, value)
            check(l2 == 0.0 and l1 == 0.0, "%s: a <-> a = %r, a <+> a = %r, expected 0" % (label, l2, l1))
            check(abs(cos_self) <= 1e-6, "%s: a <=> a = %r, expected ~0" % (label, cos_self))
            check(cos_zero != cos_zero, "%s: a <=> zero vector = %r, expected NaN" % (label, cos_zero))
            check(norm_zero == 0.0, "%s: vector_norm(zero) = %r" % (label, norm_zero))


def test_l2_normalize(conn, rng):
    simd = supported_simd(conn)
    for dim in DIMS:
        for kind in ("normal", "mixed"):
            a = random_vector(rng, dim, kind)
            a64 = a.astype(np.float64)
            expected = (a64 / np.sqrt(np.dot(a64, a64))).astype(np.float32)
            outs = {}
            for value in simd:
                set_simd(conn, value)
                (text,) = query_one(conn, "SELECT l2_normalize(%s::cvec)::text", (f32_text(a),))
                got = parse_cvec(text)
                label = "l2_normalize dim %d %s simd=%s" % (dim, kind, value)
                check(got.shape == expected.shape, "%s: %d elements" % (label, len(got)))
                err = np.abs(got.astype(np.float64) - expected.astype(np.float64))
                bad = np.nonzero(err > 1e-6 * np.abs(expected.astype(np.float64)))[0]
                check(len(bad) == 0, "%s: %d elements off by more than rtol 1e-6; first at %d: got %r, expected %r"
                      % (label, len(bad), bad[0] if len(bad) else -1,
                         got[bad[0]] if len(bad) else None, expected[bad[0]] if len(bad) else None))
                norm = np.sqrt(np.sum(got.astype(np.float64) ** 2))
                check(abs(norm - 1.0) <= 1e-6, "%s: norm of result %r" % (label, norm))
                outs[value] = got
            for value in simd[1:]:
                assert_bits_equal(outs[value], outs[simd[0]],
                                  "l2_normalize dim %d %s simd=%s vs %s" % (dim, kind, value, simd[0]))


def test_elementwise_arithmetic(conn, rng):
    simd = supported_simd(conn)
    for dim in DIMS:
        for kind in ("normal", "mixed"):
            a = random_vector(rng, dim, kind)
            b = random_vector(rng, dim, kind)
            with np.errstate(all="raise"):
                expected = {"+": a + b, "-": a - b, "*": a * b}
            for value in simd:
                set_simd(conn, value)
                row = query_one(conn, "SELECT (a + b)::text, (a - b)::text, (a * b)::text "
                                      "FROM (SELECT %s::cvec a, %s::cvec b) s", (f32_text(a), f32_text(b)))
                for op, text in zip(("+", "-", "*"), row):
                    assert_bits_equal(parse_cvec(text), expected[op],
                                      "a %s b, dim %d %s simd=%s" % (op, dim, kind, value))


def test_subvector(conn, rng):
    for dim in DIMS:
        a = random_vector(rng, dim, "mixed")
        cases = {(1, dim), (1, 1), (dim, 1)}
        for _ in range(4):
            start = int(rng.integers(1, dim + 1))
            count = int(rng.integers(1, dim - start + 2))
            cases.add((start, count))
        for start, count in sorted(cases):
            (text,) = query_one(conn, "SELECT subvector(%s::cvec, %s, %s)::text", (f32_text(a), start, count))
            assert_bits_equal(parse_cvec(text), a[start - 1:start - 1 + count],
                              "subvector(dim %d, %d, %d)" % (dim, start, count))


def test_text_round_trip(conn, rng):
    for dim in DIMS:
        for kind in ("normal", "mixed"):
            a = random_vector(rng, dim, kind)
            (text, dims) = query_one(conn, "SELECT %s::cvec::text, vector_dims(%s::cvec)",
                                     (f32_text(a), f32_text(a)))
            check(dims == dim, "vector_dims = %r, expected %d" % (dims, dim))
            assert_bits_equal(parse_cvec(text), a, "text round trip dim %d %s" % (dim, kind))
            # the output must read back to the same value
            (again,) = query_one(conn, "SELECT %s::cvec::text", (text,))
            check(again == text, "output text does not reproduce itself (dim %d %s)" % (dim, kind))
    # edge values: tiny and huge normal floats, signed zero
    edge = np.array([np.finfo(np.float32).tiny, -np.finfo(np.float32).tiny, np.finfo(np.float32).max,
                     -np.finfo(np.float32).max, 0.0, -0.0, 1.0, 0.1, 1.0 / 3.0, 16777217.0], dtype=np.float32)
    (text,) = query_one(conn, "SELECT %s::cvec::text", (f32_text(edge),))
    assert_bits_equal(parse_cvec(text), edge, "text round trip of edge values")


def test_array_casts(conn, rng):
    for dim in DIMS:
        a = random_vector(rng, dim, "mixed")
        # real[] -> cvec and cvec -> real[]
        (text,) = query_one(conn, "SELECT (%s::real[])::cvec::text", (f32_array_text(a),))
        assert_bits_equal(parse_cvec(text), a, "real[] -> cvec dim %d" % dim)
        (text,) = query_one(conn, "SELECT (%s::cvec)::real[]::text", (f32_text(a),))
        assert_bits_equal(parse_real_array(text), a, "cvec -> real[] dim %d" % dim)
        # double precision[] -> cvec rounds each element to float32
        d = rng.standard_normal(dim) * 10.0 ** rng.uniform(-3, 3, dim)
        (text,) = query_one(conn, "SELECT (%s::double precision[])::cvec::text",
                            ("{" + ",".join(repr(float(x)) for x in d) + "}",))
        assert_bits_equal(parse_cvec(text), d.astype(np.float32), "double precision[] -> cvec dim %d" % dim)
        # integer[] -> cvec (exact below 2^24)
        ints = rng.integers(-(2**24), 2**24, dim)
        (text,) = query_one(conn, "SELECT (%s::integer[])::cvec::text",
                            ("{" + ",".join(str(int(x)) for x in ints) + "}",))
        assert_bits_equal(parse_cvec(text), ints.astype(np.float32), "integer[] -> cvec dim %d" % dim)
        # numeric[] -> cvec: exact decimal expansions of float32 values
        exact = [str(decimal.Decimal(float(x))) for x in a]
        (text,) = query_one(conn, "SELECT (%s::numeric[])::cvec::text", ("{" + ",".join(exact) + "}",))
        assert_bits_equal(parse_cvec(text), a, "numeric[] -> cvec dim %d" % dim)


def test_input_validation(conn, rng):
    bad = ["[NaN]", "[1,NaN,2]", "[Infinity]", "[1,-Infinity]", "[1e39]", "[]", "[1,2", "1,2]", "[1,,2]"]
    for text in bad:
        try:
            query_one(conn, "SELECT %s::cvec::text", (text,))
        except psycopg2.Error:
            continue
        raise TestFailure("%r was accepted as a cvec" % text)
    for sql, params in (("SELECT %s::cvec(3)", ("[1,2]",)),
                        ("SELECT %s::cvec(16001)", ("[1]",)),
                        ("SELECT %s::cvec(0)", ("[1]",)),
                        ("SELECT %s::cvec <-> %s::cvec", ("[1,2]", "[1,2,3]"))):
        try:
            query_one(conn, sql, params)
        except psycopg2.Error:
            continue
        raise TestFailure("no error from %s with %r" % (sql, params))
    (dims,) = query_one(conn, "SELECT vector_dims(%s::cvec(16000))", (f32_text(np.ones(16000)),))
    check(dims == 16000, "vector_dims of a cvec(16000) = %r" % dims)


def test_comparisons(conn, rng):
    a = random_vector(rng, 17, "normal")
    b = a.copy()
    b[5] = np.nextafter(b[5], np.float32(np.inf))
    row = query_one(conn, "SELECT a = a, a = b, a <> b, a < b, a <= b, b > a, b >= a, a <> a "
                          "FROM (SELECT %s::cvec a, %s::cvec b) s", (f32_text(a), f32_text(b)))
    check(row == (True, False, True, True, True, True, True, False),
          "comparisons of a and a copy one ulp larger at element 6: %r" % (row,))


def make_table(conn, name, vectors, clusters=None):
    """A regular (not temporary: parallel workers must see it) table of vectors."""
    table = TABLE_PREFIX + name
    dim = vectors.shape[1]
    query(conn, "DROP TABLE IF EXISTS %s" % table)
    query(conn, "CREATE TABLE %s (id bigint PRIMARY KEY, grp int, embedding cvec(%d))" % (table, dim))
    rows = []
    for i, v in enumerate(vectors):
        grp = int(clusters[i]) if clusters is not None else 0
        rows.append("%d\t%d\t%s\n" % (i + 1, grp, f32_text(v)))
    with conn.cursor() as cur:
        cur.copy_expert("COPY %s (id, grp, embedding) FROM STDIN" % table, io.StringIO("".join(rows)))
    query(conn, "ANALYZE %s" % table)
    return table


def drop_table(conn, table):
    query(conn, "DROP TABLE IF EXISTS %s" % table)


def check_aggregate(got, vectors, average, label):
    v64 = vectors.astype(np.float64)
    exp64 = v64.mean(axis=0) if average else v64.sum(axis=0)
    expected = exp64.astype(np.float32).astype(np.float64)
    scale = np.abs(v64).mean(axis=0) if average else np.abs(v64).sum(axis=0)
    err = np.abs(got.astype(np.float64) - expected)
    tol = 1e-6 * np.abs(expected) + 1e-12 * scale
    bad = np.nonzero(err > tol)[0]
    if len(bad):
        i = bad[0]
        raise TestFailure("%s: %d of %d elements off (rtol 1e-6); first at %d: got %r, numpy %r (float64 %r)"
                          % (label, len(bad), len(got), i, got[i], np.float32(expected[i]), exp64[i]))


def test_avg_sum_vs_numpy(conn, rng):
    n, dim = 3000, 96
    centre = rng.uniform(-1, 1, dim)
    vectors = (centre + rng.standard_normal((n, dim)) * 10.0 ** rng.uniform(-2, 1, dim)).astype(np.float32)
    groups = rng.integers(0, 5, n)
    table = make_table(conn, "agg", vectors, groups)
    try:
        query(conn, "SET max_parallel_workers_per_gather = 0")
        avg_text, sum_text = query_one(conn, "SELECT avg(embedding)::text, sum(embedding)::text FROM %s" % table)
        check_aggregate(parse_cvec(avg_text), vectors, True, "avg over %d rows" % n)
        check_aggregate(parse_cvec(sum_text), vectors, False, "sum over %d rows" % n)
        for g, avg_text, sum_text, count in query(
                conn, "SELECT grp, avg(embedding)::text, sum(embedding)::text, count(*) FROM %s "
                      "GROUP BY grp ORDER BY grp" % table):
            members = vectors[groups == g]
            check(count == len(members), "group %d: count %d, expected %d" % (g, count, len(members)))
            check_aggregate(parse_cvec(avg_text), members, True, "avg of group %d" % g)
            check_aggregate(parse_cvec(sum_text), members, False, "sum of group %d" % g)
        (empty,) = query_one(conn, "SELECT avg(embedding) FROM %s WHERE false" % table)
        check(empty is None, "avg over no rows = %r, expected NULL" % (empty,))
    finally:
        drop_table(conn, table)


def plan_node_types(plan):
    """Every node of an EXPLAIN (FORMAT JSON) plan as 'Node Type[/Partial Mode]'."""
    found = []

    def walk(node):
        found.append(node.get("Node Type", "") + "/" + node.get("Partial Mode", ""))
        for child in node.get("Plans", []):
            walk(child)
    walk(plan)
    return found


def test_parallel_aggregate(conn, rng):
    n, dim = 20000, 32
    vectors = (rng.uniform(-1, 1, dim) + rng.standard_normal((n, dim))).astype(np.float32)
    table = make_table(conn, "par", vectors)
    try:
        sql = "SELECT avg(embedding)::text, sum(embedding)::text, count(*) FROM %s" % table
        query(conn, "SET max_parallel_workers_per_gather = 0")
        serial = query_one(conn, sql)
        for setting in ("parallel_setup_cost = 0", "parallel_tuple_cost = 0",
                        "min_parallel_table_scan_size = 0", "max_parallel_workers_per_gather = 2"):
            query(conn, "SET " + setting)
        (plan_json,) = query_one(conn, "EXPLAIN (FORMAT JSON) " + sql)
        if isinstance(plan_json, str):
            plan_json = json.loads(plan_json)
        nodes = plan_node_types(plan_json[0]["Plan"])
        check("Aggregate/Partial" in nodes, "no Partial Aggregate in the plan: %s" % nodes)
        check(any(x.startswith("Gather") for x in nodes), "no Gather in the plan: %s" % nodes)
        (analyze_json,) = query_one(conn, "EXPLAIN (ANALYZE, FORMAT JSON) " + sql)
        if isinstance(analyze_json, str):
            analyze_json = json.loads(analyze_json)

        def launched(node):
            total = node.get("Workers Launched", 0)
            for child in node.get("Plans", []):
                total += launched(child)
            return total
        workers = launched(analyze_json[0]["Plan"])
        check(workers > 0, "the parallel plan launched no workers")
        parallel = query_one(conn, sql)
        check(parallel[2] == serial[2] == n, "count: parallel %r, serial %r, expected %d" % (parallel[2], serial[2], n))
        for k, name in ((0, "avg"), (1, "sum")):
            p = parse_cvec(parallel[k]).astype(np.float64)
            s = parse_cvec(serial[k]).astype(np.float64)
            scale = np.abs(vectors.astype(np.float64)).mean(axis=0) * (1 if k == 0 else n)
            bad = np.nonzero(np.abs(p - s) > 1e-6 * np.abs(s) + 1e-12 * scale)[0]
            check(len(bad) == 0, "parallel %s differs from serial at %d elements; first %d: %r vs %r"
                  % (name, len(bad), bad[0] if len(bad) else -1, p[bad[0]] if len(bad) else None,
                     s[bad[0]] if len(bad) else None))
            check_aggregate(parse_cvec(parallel[k]), vectors, k == 0, "parallel %s vs numpy" % name)
        print("    parallel plan: %d workers launched" % workers)
    finally:
        drop_table(conn, table)


def test_nearest_neighbours(conn, rng):
    n, dim, k = 2000, 64, 10
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    table = make_table(conn, "knn", vectors)
    simd = supported_simd(conn)
    try:
        v64 = vectors.astype(np.float64)
        for qi in range(5):
            q = rng.standard_normal(dim).astype(np.float32)
            if qi == 4:
                q = vectors[int(rng.integers(0, n))].copy()  # a query that is in the table
            dist = np.sqrt(np.sum((v64 - q.astype(np.float64)) ** 2, axis=1))
            order = np.argsort(dist, kind="stable")
            for value in simd:
                set_simd(conn, value)
                rows = query(conn, "SELECT id, embedding <-> %%s::cvec FROM %s ORDER BY embedding <-> %%s::cvec "
                                   "LIMIT %d" % (table, k), (f32_text(q), f32_text(q)))
                ids = [int(r[0]) - 1 for r in rows]
                label = "query %d simd=%s" % (qi, value)
                check(len(ids) == k and len(set(ids)) == k, "%s: got ids %s" % (label, ids))
                if ids == list(order[:k]):
                    continue
                # accept ties: the i-th result must be as near as numpy's i-th
                for i, got in enumerate(ids):
                    check(abs(dist[got] - dist[order[i]]) <= 1e-9 * max(dist[order[i]], 1e-30),
                          "%s: rank %d is id %d at %r, numpy's is id %d at %r"
                          % (label, i + 1, got + 1, dist[got], order[i] + 1, dist[order[i]]))
                for i, r in enumerate(rows):
                    check(abs(r[1] - dist[ids[i]]) <= 1e-6 * max(dist[ids[i]], 1e-30),
                          "%s: distance of id %d is %r, numpy %r" % (label, ids[i] + 1, r[1], dist[ids[i]]))
    finally:
        drop_table(conn, table)


# ---------------------------------------------------------------------------
# Runner
# ---------------------------------------------------------------------------

def main(argv):
    print("seed = %d (set CV_TEST_SEED=%d to repeat this run)" % (SEED, SEED))
    tests = [(name, fn) for name, fn in globals().items() if name.startswith("test_") and callable(fn)]
    if argv:
        unknown = set(argv) - {name for name, _ in tests}
        if unknown:
            print("unknown tests: %s" % ", ".join(sorted(unknown)))
            print("0 passed, 1 failed")
            return 1
        tests = [(name, fn) for name, fn in tests if name in argv]
    passed = failed = 0
    try:
        conn = connect()
        query(conn, "CREATE EXTENSION IF NOT EXISTS clustervec")
        conn.close()
    except Exception as e:  # noqa: BLE001 - any setup error fails the run
        print("FAIL setup: %s" % str(e).strip())
        print("0 passed, 1 failed")
        return 1
    for name, fn in tests:
        start = time.monotonic()
        conn = None
        try:
            conn = connect()
            fn(conn, rng_for(name))
            passed += 1
            print("PASS %s (%.1f s)" % (name, time.monotonic() - start))
        except TestFailure as e:
            failed += 1
            print("FAIL %s: %s" % (name, e))
        except Exception as e:  # noqa: BLE001 - report and go on to the next test
            failed += 1
            print("FAIL %s: %s: %s" % (name, type(e).__name__, str(e).strip()))
            traceback.print_exc(file=sys.stdout)
        finally:
            if conn is not None:
                try:
                    conn.close()
                except Exception:  # noqa: BLE001
                    pass
        sys.stdout.flush()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
