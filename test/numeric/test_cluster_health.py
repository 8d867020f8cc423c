#!/usr/bin/python3
"""cluster_health, cluster_health_query, cluster_health_summary and the
cluster_stats(cvec) aggregate against an independent float64 reference.

The reference is test/numeric/health_reference.py, written from
STATISTICS.md.  The CPU implementation is float64 too, so the comparison is
tight (RTOL = 1e-9 relative plus 1e-12 of the column's scale); outcomes that
depend on a float64 comparison are accepted either way only for items within
BAND = 1e-9 relative of the threshold (the rules of STATISTICS.md's
tolerance section with a tighter band): threshold counts, sigma and entropy
bins, two-means decisions (the split columns of such a cluster are exempt and
counted), the nearest label and the neighbour set, and the degeneracy tests
(0.1 to 10 eps of their scale).

Runs against a live server through psycopg2; libpq reads PGHOST, PGPORT,
PGUSER and PGDATABASE.  Inputs are fresh random numbers on every run: the seed
is printed, and CV_TEST_SEED repeats a run.  Every test_* function runs on its
own connection with its own generator, so a test can be rerun alone:
    /usr/bin/python3 test/numeric/test_cluster_health.py [test_name ...]
Output: "PASS name" / "FAIL name: reason" per test, then "N passed, N failed".
A missing SQL function fails every test that needs it, naming it.
"""

import io
import itertools
import json
import math
import os
import random
import sys
import time
import traceback
import zlib

import numpy as np
import psycopg2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import health_reference as ref  # noqa: E402

SEED = int(os.environ.get("CV_TEST_SEED") or random.SystemRandom().randrange(2**32))
TABLE_PREFIX = "cvhealth_"
RTOL = 1e-9          # relative tolerance of real-valued columns
ATOL = 1e-12         # absolute tolerance, times the column's scale
BAND = 1e-9          # threshold band: items this close (relative) may go either way
RANK_RTOL = 1e-6     # effective_rank: a float64 Gram eigensolver gives sv ~ 1e-8 * max sv for zero sv

HEALTH_FUNCTIONS = ("cluster_health", "cluster_health_query", "cluster_health_summary")
PARAM_NAMES = ("outlier_z", "dup_cos", "neighbours", "sigma_bins", "entropy_bins", "rank_max_members")
HEALTH_COLUMNS = ("cluster",) + ref.COLUMNS + ("cluster_text", "nearest_cluster_text")
INT8, FLOAT8, TEXT = 20, 701, 25

LENGTHS = ("centroid_norm", "mean_dist", "spread", "radius", "mean_norm", "mean_pairwise_dist", "breadth",
           "nearest_dist")
SQUARES = ("inertia", "between_ss")
SPLIT = ("split_gain", "split_balance", "split_separation", "split_silhouette")
SIGMA_DEPENDENT = ("local_density", "entanglement", "potential_depth", "curvature", "escape_probability")
# columns to leave unchecked when a degeneracy test lies inside its band
DEGENERATE_COLUMNS = {
    "collapsed": ref.COLLAPSED_NULL + ("sigma", "local_density", "dist_entropy", "core_periphery_ratio",
                                       "outlier_ratio"),
    "s_zero": ("skew", "kurtosis", "outlier_ratio", "core_periphery_ratio"),
    "c_zero": ("cohesion", "novelty"),
    "g_zero": ("novelty",),
}


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

class TestFailure(AssertionError):
    """A mismatch a test detected (as opposed to an unexpected exception)."""


def check(condition, message):
    if not condition:
        raise TestFailure(message)


def connect():
    """A connection; waits up to 60 s for a server that is restarting (after
    a crash in an earlier test) so that one crash fails one test only."""
    deadline = time.monotonic() + 60
    while True:
        try:
            conn = psycopg2.connect("")
            break
        except psycopg2.OperationalError as e:
            text = str(e)
            if time.monotonic() > deadline or not any(
                    s in text for s in ("recovery mode", "starting up", "shutting down", "No such file",
                                        "Connection refused", "closed the connection unexpectedly",
                                        "not yet accepting connections")):
                raise
            time.sleep(0.5)
    conn.autocommit = True
    return conn


def lost_connection(e, sql):
    """A TestFailure naming the statement during which the server went away."""
    return TestFailure("the connection broke (did the server crash?) during: %s [%s]"
                       % (" ".join(sql.split())[:300], " ".join(str(e).split())[:120]))


def query(conn, sql, params=None):
    try:
        with conn.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall() if cur.description is not None else None
    except (psycopg2.OperationalError, psycopg2.InterfaceError) as e:
        raise lost_connection(e, sql) from None


def query_one(conn, sql, params=None):
    rows = query(conn, sql, params)
    check(rows is not None and len(rows) == 1, "expected one row from: %s" % sql[:200])
    return rows[0]


def rng_for(name):
    return np.random.default_rng([SEED, zlib.crc32(name.encode())])


def f32_text(values):
    return "[" + ",".join(str(np.float32(v)) for v in values) + "]"


def parse_cvec(text):
    body = text.strip()
    check(body.startswith("[") and body.endswith("]"), "not a cvec text: %r" % text[:80])
    return np.array([np.float32(float(s)) for s in body[1:-1].split(",")], dtype=np.float32)


def require_functions(conn, names=HEALTH_FUNCTIONS + ("cluster_stats",)):
    present = {r[0] for r in query(conn, "SELECT DISTINCT proname FROM pg_proc WHERE proname = ANY(%s)",
                                   (list(names),))}
    missing = [n for n in names if n not in present]
    check(not missing, "SQL function%s %s not defined by the installed extension (not written yet, "
          "or the extension is not updated)" % ("s" if len(missing) > 1 else "", ", ".join(missing)))


def copy_escape(value):
    if value is None:
        return "\\N"
    s = str(value)
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


class Table:
    """A regular table (id, grp, ord, ord2, embedding) loaded by COPY in the
    order of `rows`, so ctid order is that order.  rows: (label, vector, ord)."""

    def __init__(self, conn, name, rows, dim, label_type="int", collate=None, ord2=None):
        self.name = TABLE_PREFIX + name
        self.rows = rows
        self.dim = dim
        self.text = label_type in ("text", "varchar")
        query(conn, "DROP TABLE IF EXISTS %s" % self.name)
        query(conn, "CREATE TABLE %s (id bigint PRIMARY KEY, grp %s%s, ord int, ord2 float8, embedding cvec(%d))"
              % (self.name, label_type, (" COLLATE \"%s\"" % collate) if collate else "", dim))
        if ord2 is None:
            ord2 = list(range(len(rows)))
        self.ord2 = ord2
        lines = []
        for i, (lab, vec, o) in enumerate(rows):
            lines.append("%d\t%s\t%s\t%r\t%s\n" % (i + 1, copy_escape(lab), copy_escape(o), float(ord2[i]),
                                                   "\\N" if vec is None else f32_text(vec)))
        with conn.cursor() as cur:
            cur.copy_expert("COPY %s (id, grp, ord, ord2, embedding) FROM STDIN" % self.name,
                            io.StringIO("".join(lines)))
        query(conn, "ANALYZE %s" % self.name)

    def clusters(self, order=None, sequence=None):
        """(label, members) in label order, members in member order, and the
        sort keys (ranks for text labels).  order: None (ctid), "ord" (ties by
        ctid) or "ord2"; sequence: an explicit row order (a query's output)."""
        groups = {}
        positions = sequence if sequence is not None else range(len(self.rows))
        for rank_pos, pos in enumerate(positions):
            lab, vec, o = self.rows[pos]
            if lab is None or vec is None:
                continue
            if order == "ord":
                key = (o, pos)
            elif order == "ord2":
                key = (self.ord2[pos], pos)
            else:
                key = (rank_pos,)
            groups.setdefault(lab, []).append((key, np.asarray(vec, dtype=np.float32)))
        if self.text:
            labels = sorted(groups, key=lambda s: s.encode("utf-8"))
            keys = list(range(1, len(labels) + 1))
        else:
            labels = sorted(groups)
            keys = labels
        out = []
        for lab in labels:
            members = sorted(groups[lab], key=lambda t: t[0])
            out.append((lab, np.stack([m for _, m in members]).astype(np.float64)))
        return out, keys

    def drop(self, conn):
        try:
            query(conn, "DROP TABLE IF EXISTS %s" % self.name)
        except (psycopg2.InterfaceError, psycopg2.OperationalError, TestFailure):
            pass  # the server crashed: the test fails with the original error


def param_sql(params):
    parts, values = [], []
    for k in PARAM_NAMES + ("progress",):
        if k in params:
            parts.append("%s => %%s" % k)
            values.append(params[k])
    return parts, values


def call_health(conn, table, order=None, fn="cluster_health", **params):
    """Rows of cluster_health (or _summary) as dicts, with the column names
    and type oids, and the notices it raised."""
    args = ["%s::regclass", "%s::name", "%s::name"]
    values = [table.name, "grp", "embedding"]
    if order is not None:
        args.append("%s::name")
        values.append(order)
    p, v = param_sql(params)
    sql = "SELECT * FROM %s(%s)" % (fn, ", ".join(args + p))
    if fn == "cluster_health":
        sql += " ORDER BY cluster"
    return run_health_sql(conn, sql, values + v)


def call_health_query(conn, sql_text, **params):
    p, v = param_sql(params)
    sql = "SELECT * FROM cluster_health_query(%s) ORDER BY cluster" % ", ".join(["%s"] + p)
    return run_health_sql(conn, sql, [sql_text] + v)


def run_health_sql(conn, sql, values):
    del conn.notices[:]
    try:
        with conn.cursor() as cur:
            cur.execute(sql, values)
            names = [c.name for c in cur.description]
            types = [c.type_code for c in cur.description]
            rows = [dict(zip(names, r)) for r in cur.fetchall()]
    except (psycopg2.OperationalError, psycopg2.InterfaceError) as e:
        raise lost_connection(e, sql % tuple(repr(v) for v in values)) from None
    notices = list(conn.notices)
    return rows, names, types, notices


def sql_error_code(fn):
    try:
        fn()
    except psycopg2.Error as e:
        return e.pgcode, (e.pgerror or "").strip().splitlines()[0] if e.pgerror else str(e)
    return None, None


# ---------------------------------------------------------------------------
# Comparison against the reference
# ---------------------------------------------------------------------------

class Report:
    """Counts of what a test checked and what it had to exempt."""

    def __init__(self):
        self.values = 0
        self.notes = {}

    def note(self, what):
        self.notes[what] = self.notes.get(what, 0) + 1

    def line(self):
        extra = ", ".join("%s: %d" % kv for kv in sorted(self.notes.items()))
        return "%d values checked%s" % (self.values, ("; exempt/banded: " + extra) if extra else "")


def close(got, exp, rtol, atol):
    return got is not None and abs(got - exp) <= rtol * abs(exp) + atol


def counts_match(got, items, denom):
    lo, hi = ref.count_range(items[0], BAND)
    return got is not None and any(abs(got - c / denom) <= 1e-12 for c in range(lo, hi + 1)), (lo, hi)


def ratio_match(got, items):
    (nlo, nhi) = ref.count_range(items[0], BAND)
    (dlo, dhi) = ref.count_range(items[1], BAND)
    if got is None:
        return dlo == 0, (nlo, nhi, dlo, dhi)
    for a in range(nlo, nhi + 1):
        for b in range(max(dlo, 1), dhi + 1):
            if abs(got - a / b) <= 1e-12 * max(1.0, a / b):
                return True, None
    return False, (nlo, nhi, dlo, dhi)


def entropy_match(got, pd, ent, scale, report):
    lo, hi, we, bins = ent["lo"], ent["hi"], ent["we"], ent["bins"]
    if hi == lo:
        return got == 0.0
    if hi - lo <= BAND * hi:
        report.note("dist_entropy max ~ min")
        return got is not None
    base = np.minimum(np.floor((pd - lo) / we), bins - 1).astype(np.int64)
    amb = ref.edge_ambiguous(pd, lo, we, bins, BAND, scale)
    expected = ref.entropy_of_counts(np.bincount(base, minlength=bins), bins)
    if close(got, expected, RTOL, ATOL):
        return True
    if len(amb) == 0:
        return False
    report.note("dist_entropy near a bin edge")
    if len(amb) > 12:
        return got is not None and 0.0 <= got <= 1.0
    for k in range(1, len(amb) + 1):
        for subset in itertools.combinations(amb, k):
            idx = base.copy()
            for p in subset:
                edge = int(round((pd[p] - lo) / we))
                idx[p] = edge - 1 if idx[p] >= edge else edge
            if close(got, ref.entropy_of_counts(np.bincount(idx, minlength=bins), bins), RTOL, ATOL):
                return True
    return False


def compare_cluster(got, r, params, report):
    """Problems (strings) of one SQL row against one reference cluster."""
    problems = []
    v, aux, X, ctx = r["values"], r["aux"], r["X"], r["ctx"]
    K, n, mn = ctx["K"], v["n"], v["mean_norm"]
    p = dict(ref.DEFAULTS, **{k: params[k] for k in params if k in ref.DEFAULTS})
    text = isinstance(r["label"], str)

    def bad(col, why=""):
        problems.append("%s = %r, reference %r%s" % (col, got.get(col), v.get(col), (" (%s)" % why) if why else ""))

    skip = set()
    for name in ref.degenerate_ambiguous(aux):
        report.note("degenerate band: " + name)
        skip.update(DEGENERATE_COLUMNS[name])
    nb = aux.get("neighbours")
    if nb is not None:
        if any(0.1 * ref.EPS * s < dd <= 10 * ref.EPS * s for dd, s in nb["coinciding"]):
            report.note("degenerate band: coinciding")
            skip.add("db_ratio")
    if ref.two_means_near_tie(aux, BAND):
        report.note("two-means near tie (split columns exempt)")
        skip.update(SPLIT)

    # labels
    exp_cluster = r["key"]
    if got["cluster"] != exp_cluster:
        problems.append("cluster = %r, expected %r" % (got["cluster"], exp_cluster))
    if text:
        if got.get("cluster_text") != r["label"]:
            problems.append("cluster_text = %r, expected %r" % (got.get("cluster_text"), r["label"]))
    elif got.get("cluster_text") not in (None, str(r["label"])):
        problems.append("cluster_text = %r for an integer label %r" % (got.get("cluster_text"), r["label"]))
    if K == 1:
        for col in ("nearest_cluster", "nearest_cluster_text"):
            if got.get(col) is not None:
                problems.append("%s = %r with K = 1, expected NULL" % (col, got.get(col)))
    else:
        order, dists = nb["order"], nb["dists"]
        cands = [0] + [k for k in range(1, len(order))
                       if dists[k] != dists[0] and dists[k] - dists[0] <= BAND * dists[k]]
        if len(cands) > 1:
            report.note("nearest_cluster near tie")
        ok_keys = [ctx["keys"][order[k]] for k in cands]
        ok_labels = [ctx["labels"][order[k]] for k in cands]
        if got["nearest_cluster"] not in ok_keys:
            problems.append("nearest_cluster = %r, expected %r (distances %s)"
                            % (got["nearest_cluster"], ok_keys[0] if len(ok_keys) == 1 else ok_keys, dists[:3]))
        if text:
            if got.get("nearest_cluster_text") not in ok_labels:
                problems.append("nearest_cluster_text = %r, expected %r" % (got.get("nearest_cluster_text"), ok_labels))
        elif got.get("nearest_cluster_text") not in [None] + [str(x) for x in ok_labels]:
            problems.append("nearest_cluster_text = %r for integer labels" % (got.get("nearest_cluster_text"),))
        kk = p["neighbours"]
        if kk < K - 1:
            d_in, d_out = dists[kk - 1], dists[kk]
            if d_in != d_out and d_out - d_in <= BAND * d_out:
                report.note("neighbour set near tie")
                skip.update(("neighbour_relevance", "centroid_silhouette"))

    # sigma first: the sigma-dependent columns are evaluated at the SQL sigma
    sigma_use = v["sigma"]
    if "sigma" not in skip:
        gs = got["sigma"]
        if v["sigma"] is None or aux["collapsed"]:
            if gs != v["sigma"]:
                bad("sigma")
        else:
            pairs = aux["pairs"]
            w = pairs["sigma_w"]
            amb = ref.edge_ambiguous(pairs["pd"], 0.0, w, p["sigma_bins"], BAND, max(2 * v["radius"], mn))
            if gs is None:
                bad("sigma")
            elif len(amb) == 0:
                if not close(gs, v["sigma"], RTOL, 0.0):
                    bad("sigma")
            else:
                report.note("sigma: a distance near a bin edge")
                if abs(gs - v["sigma"]) > 1.001 * w:
                    bad("sigma", "more than a bin off")
            if gs is not None and gs > 0:
                sigma_use = gs
        report.values += 1
    dep, dep_items = ref.sigma_dependent(X, v, aux, sigma_use, v["nearest_dist"], K)
    items = dict(aux.get("items", {}))
    items.update(dep_items)
    expect = dict(v)
    expect.update(dep)

    cn = v["centroid_norm"]
    gn = ref.norm(ctx["g"])
    for col in ref.COLUMNS:
        if col in skip or col in ("sigma", "nearest_cluster"):
            continue
        report.values += 1
        e, gv = expect[col], got[col]
        if e is None or gv is None:
            if not (e is None and gv is None):
                bad(col, "NULL mismatch")
            continue
        if col == "n":
            if gv != e:
                bad(col)
        elif col in LENGTHS:
            scale = max(mn, ctx["all_mean_norm"]) if col == "nearest_dist" else mn
            if not close(gv, e, RTOL, ATOL * scale):
                bad(col)
        elif col in SQUARES:
            scale = max(mn, ctx["all_mean_norm"]) if col == "between_ss" else mn
            if not close(gv, e, RTOL, ATOL * n * scale * scale):
                bad(col)
        elif col in ("outlier_ratio", "redundancy", "redundant_members", "local_density", "neighbour_relevance"):
            if col in items:
                denom = len(items[col][0]["values"])
                ok, rng_ = counts_match(gv, items[col], denom)
                if not ok:
                    bad(col, "count outside %s of %d" % (rng_, denom))
                elif rng_[0] != rng_[1]:
                    report.note("%s: an item within the band" % col)
            elif gv != e:
                bad(col)
        elif col == "core_periphery_ratio":
            if col in items:
                ok, info = ratio_match(gv, items[col])
                if not ok:
                    bad(col, "counts %s" % (info,))
            elif gv != e:
                bad(col)
        elif col == "dist_entropy":
            ent = aux["pairs"]["entropy"] if aux.get("pairs") else None
            if ent is None:
                if gv != e:
                    bad(col)
            elif not entropy_match(gv, aux["pairs"]["pd"], ent, max(ent["hi"], mn), report):
                bad(col)
        elif col in ("skew", "kurtosis"):
            s = v["spread"]
            amp = (mn / s) if s > 0 else 1e12
            if not close(gv, e, RTOL, 1e-9 + 1e-12 * amp * (abs(e) + 3.0)):
                bad(col)
        elif col == "effective_rank":
            if not close(gv, e, RANK_RTOL, 0.0):
                bad(col)
        elif col == "cohesion":
            if not close(gv, e, RTOL, ATOL * max(1.0, mn / cn)):
                bad(col)
        elif col == "novelty":
            if not close(gv, e, RTOL, ATOL * max(1.0, mn / cn, ctx["all_mean_norm"] / gn)):
                bad(col)
        elif col == "db_ratio":
            dmin = min([dd for dd, s in nb["coinciding"] if dd > ref.EPS * s] or [mn or 1.0])
            if not close(gv, e, RTOL, ATOL * abs(e) * max(1.0, max(mn, ctx["all_mean_norm"]) / dmin)):
                bad(col)
        elif col == "split_balance":
            if abs(gv - e) > 1e-12:
                bad(col)
        else:
            if not close(gv, e, RTOL, ATOL):
                bad(col)
    return problems


def compare_health(got_rows, refrows, params, report, what):
    check(len(got_rows) == len(refrows), "%s: %d rows, expected %d (one per cluster)"
          % (what, len(got_rows), len(refrows)))
    problems = []
    for g, r in zip(got_rows, refrows):
        for prob in compare_cluster(g, r, params, report):
            problems.append("cluster %r (n = %d): %s" % (r["label"], r["values"]["n"], prob))
    if problems:
        raise TestFailure("%s: %d mismatches; first %s" % (what, len(problems), "; ".join(problems[:6])))


def compare_summary(got, rows, report, what):
    exp = ref.summary(rows)
    problems = []
    db_skip = any(0.1 * ref.EPS * s < dd <= 10 * ref.EPS * s
                  for r in rows if r["aux"].get("neighbours") for dd, s in r["aux"]["neighbours"]["coinciding"])
    for col in ref.SUMMARY_COLUMNS:
        e, g = exp[col], got.get(col)
        report.values += 1
        if col == "davies_bouldin" and db_skip:
            report.note("summary davies_bouldin: coinciding band")
            continue
        if e is None or g is None:
            if not (e is None and g is None):
                problems.append("%s = %r, reference %r" % (col, g, e))
        elif col in ("k", "n"):
            if g != e:
                problems.append("%s = %r, reference %r" % (col, g, e))
        elif not close(g, e, RTOL, ATOL):
            problems.append("%s = %r, reference %r" % (col, g, e))
    check(not problems, "%s: %s" % (what, "; ".join(problems)))
    return exp


def check_health(conn, table, report, what, order=None, **params):
    rows, names, types, notices = call_health(conn, table, order=order, **params)
    clusters, keys = table.clusters(order=order)
    refrows = ref.health(clusters, keys=keys, **{k: params[k] for k in params if k in ref.DEFAULTS})
    compare_health(rows, refrows, params, report, what)
    return rows, refrows, notices


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------

def blob(rng, d, n, centre_scale=4.0):
    centre = rng.standard_normal(d) * centre_scale
    axes = rng.uniform(0.2, 1.0, d) * rng.uniform(0.3, 2.0)
    return (centre + rng.standard_normal((n, d)) * axes).astype(np.float32)


def cone(rng, d, n):
    """Members around 5 u, u a unit vector: pairwise cosines around 0.95."""
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    return (5.0 * u + rng.standard_normal((n, d)) * (1.6 / math.sqrt(d))).astype(np.float32)


def mixed_clusters(rng, d):
    """Eleven clusters of varied sizes and kinds (n = 1, 2, identical members,
    a zero member, a zero-vector singleton, a narrow cone, blobs)."""
    out = []
    out.append(np.zeros((1, d), dtype=np.float32))                        # zero vector alone
    out.append(blob(rng, d, 1))                                           # n = 1
    out.append(blob(rng, d, 2))                                           # n = 2
    out.append(np.repeat(blob(rng, d, 1), 4, axis=0))                     # collapsed
    z = blob(rng, d, 6, centre_scale=0.5)
    z[3] = 0.0
    out.append(z)                                                         # a zero member
    out.append(cone(rng, d, 14))                                          # cos around dup_cos
    for n in (25, 40, 60, 90, 110):
        out.append(blob(rng, d, n))
    return out


def interleave(rng, labelled, null_rows=True, d=None):
    """Rows (label, vector, ord) of labelled clusters in a random order, plus
    rows with a NULL label or a NULL vector."""
    rows = []
    for lab, M in labelled:
        for x in M:
            rows.append((lab, x, None))
    order = rng.permutation(len(rows))
    rows = [rows[i] for i in order]
    if null_rows:
        d = d or len(rows[0][1])
        for _ in range(3):
            rows.insert(int(rng.integers(0, len(rows) + 1)), (None, blob(rng, d, 1)[0] * 50, None))
            rows.insert(int(rng.integers(0, len(rows) + 1)), (labelled[int(rng.integers(0, len(labelled)))][0],
                                                             None, None))
    ords = rng.integers(0, max(2, len(rows) // 3), len(rows))  # with ties
    return [(lab, x, int(o)) for (lab, x, _), o in zip(rows, ords)]


def sklearn_metrics():
    import sklearn.metrics as skm
    return skm


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------

def test_functions_and_columns(conn, rng):
    require_functions(conn)
    labelled = [(1, blob(rng, 4, 5)), (2, blob(rng, 4, 3))]
    t = Table(conn, "cols", interleave(rng, labelled, null_rows=False), 4)
    try:
        rows, names, types, _ = call_health(conn, t)
        check(tuple(names) == HEALTH_COLUMNS, "cluster_health columns %s, expected %s" % (names, HEALTH_COLUMNS))
        exp_types = [INT8] + [INT8 if c in ("n", "nearest_cluster") else FLOAT8 for c in ref.COLUMNS] + [TEXT, TEXT]
        wrong = [(nm, ty, ex) for nm, ty, ex in zip(names, types, exp_types) if ty != ex]
        check(not wrong, "column types (name, oid, expected oid): %s" % wrong)
        rows, names, types, _ = call_health_query(conn, "SELECT grp, embedding FROM %s" % t.name)
        check(tuple(names) == HEALTH_COLUMNS, "cluster_health_query columns %s" % names)
        rows, names, types, _ = call_health(conn, t, fn="cluster_health_summary")
        check(tuple(names) == ref.SUMMARY_COLUMNS, "summary columns %s, expected %s" % (names, ref.SUMMARY_COLUMNS))
        check(types == [INT8, INT8, FLOAT8, FLOAT8, FLOAT8, FLOAT8], "summary column types %s" % types)
        check(len(rows) == 1, "summary returned %d rows" % len(rows))
        with conn.cursor() as cur:
            cur.execute("SELECT (s).* FROM (SELECT cluster_stats(embedding) s FROM %s) q" % t.name)
            names = tuple(c.name for c in cur.description)
        check(names == ref.STATS_COLUMNS, "cluster_stats fields %s, expected %s" % (names, ref.STATS_COLUMNS))
    finally:
        t.drop(conn)


def _mixed_test(conn, rng, d, labels, label_type, name, extra_params):
    require_functions(conn)
    labelled = list(zip(labels, mixed_clusters(rng, d)))
    t = Table(conn, name, interleave(rng, labelled), d, label_type=label_type)
    report = Report()
    try:
        _, refrows, _ = check_health(conn, t, report, "defaults")
        for params in extra_params:
            check_health(conn, t, report, "parameters %s" % params, **params)
        check_health(conn, t, report, "order_column ord", order="ord", progress=False)
        print("    %s" % report.line())
    finally:
        t.drop(conn)


def test_mixed_d8(conn, rng):
    labels = [int(x) for x in rng.choice(np.arange(-20, 1000), 11, replace=False)]
    _mixed_test(conn, rng, 8, labels, "int", "d8", [
        dict(outlier_z=1.0, dup_cos=0.9, neighbours=2, sigma_bins=17, entropy_bins=7),
        dict(outlier_z=0.0, dup_cos=1.0, neighbours=1, sigma_bins=2, entropy_bins=2, rank_max_members=2),
    ])


def test_mixed_d64(conn, rng):
    labels = [-(2 ** 40), -7, 0, 3, 5, 8, 13, 2 ** 33, 2 ** 40, 2 ** 62, 99]
    rng.shuffle(labels)
    _mixed_test(conn, rng, 64, labels, "bigint", "d64", [
        dict(outlier_z=0.5, dup_cos=0.97, neighbours=3, sigma_bins=1000, entropy_bins=50),
        dict(neighbours=100),
    ])


def test_single_cluster(conn, rng):
    require_functions(conn)
    t = Table(conn, "k1", interleave(rng, [(42, blob(rng, 8, 30))]), 8)
    report = Report()
    try:
        rows, refrows, _ = check_health(conn, t, report, "K = 1")
        for col in ("nearest_cluster", "nearest_dist", "db_ratio", "neighbour_relevance", "centroid_silhouette",
                    "escape_probability"):
            check(rows[0][col] is None, "K = 1: %s = %r, expected NULL" % (col, rows[0][col]))
        (s,), _, _, _ = call_health(conn, t, fn="cluster_health_summary")
        compare_summary(s, refrows, report, "summary K = 1")
        check(s["davies_bouldin"] is None and s["calinski_harabasz"] is None,
              "K = 1: davies_bouldin %r, calinski_harabasz %r, expected NULL" % (s["davies_bouldin"],
                                                                                 s["calinski_harabasz"]))
        print("    %s" % report.line())
    finally:
        t.drop(conn)


def dyadic_point(rng, d):
    return (rng.integers(-16, 17, d) / 4.0).astype(np.float32)


def test_coinciding_centroids(conn, rng):
    require_functions(conn)
    d = 8
    c = dyadic_point(rng, d)
    e = np.eye(d, dtype=np.float32) * np.float32(0.5)
    a = np.stack([c + e[0], c - e[0]])                      # centroid c exactly
    b = np.stack([c + e[1], c - e[1], c + e[2], c - e[2]])  # centroid c exactly (dyadic sums)
    p = blob(rng, d, 9)
    q = p[::-1].copy()                                      # the same members, reversed: same centroid to ~1 ulp
    other = blob(rng, d, 20)
    labelled = [(1, a), (2, b), (3, p), (4, q), (5, other)]
    t = Table(conn, "coincide", interleave(rng, labelled), d)
    report = Report()
    try:
        rows, refrows, _ = check_health(conn, t, report, "coinciding centroids")
        byl = {r["cluster"]: r for r in rows}
        check(byl[1]["nearest_cluster"] == 2 and byl[1]["nearest_dist"] == 0.0,
              "cluster 1: nearest %r at %r, expected 2 at 0" % (byl[1]["nearest_cluster"], byl[1]["nearest_dist"]))
        check(byl[3]["nearest_cluster"] == 4, "cluster 3: nearest %r, expected 4" % byl[3]["nearest_cluster"])
        check(byl[1]["escape_probability"] == 1.0, "escape_probability at D = 0 is %r" % byl[1]["escape_probability"])
        check_health(conn, t, report, "coinciding, neighbours 1", neighbours=1)
        (s,), _, _, _ = call_health(conn, t, fn="cluster_health_summary")
        compare_summary(s, refrows, report, "summary")
        skm = sklearn_metrics()
        clusters, _ = t.clusters()
        X = np.concatenate([m for _, m in clusters])
        lab = np.concatenate([[l] * len(m) for l, m in clusters])
        # scikit-learn zeroes only centroid distances that are exactly 0; the pair
        # (3, 4) may differ by rounding there, so it is compared without that pair
        keep = np.isin(lab, [1, 2, 3, 5])
        db = skm.davies_bouldin_score(X[keep], lab[keep])
        sub = [(l, m) for l, m in clusters if l in (1, 2, 3, 5)]
        db_ref = ref.summary(ref.health(sub))["davies_bouldin"]
        check(abs(db_ref - db) <= 1e-8 * db, "reference davies_bouldin %r, sklearn %r (clusters 1, 2, 3, 5)"
              % (db_ref, db))
        t2 = Table(conn, "coincide2", [r for r in t.rows if r[0] in (1, 2, 3, 5)], d)
        try:
            (s2,), _, _, _ = call_health(conn, t2, fn="cluster_health_summary")
        finally:
            t2.drop(conn)
        check(abs(s2["davies_bouldin"] - db) <= 1e-8 * db, "davies_bouldin %r, sklearn %r (clusters 1, 2, 3, 5)"
              % (s2["davies_bouldin"], db))
        print("    %s" % report.line())
    finally:
        t.drop(conn)


def test_nearest_ties(conn, rng):
    """Centroids on a dyadic grid: exact ties in centroid distance go to the smaller label."""
    require_functions(conn)
    d = 8
    p0 = dyadic_point(rng, d)
    e = np.eye(d, dtype=np.float32)
    pos = {10: p0, 20: p0 + 2 * e[0], 30: p0 - 2 * e[0], 40: p0 + 2 * e[1], 50: p0 - 2 * e[1],
           60: p0 + 2 * e[0] + 2 * e[1], 70: p0 + 8 * e[2]}
    labelled = []
    for lab, c in pos.items():
        k = int(rng.integers(0, 3))
        delta = np.float32(0.75) * e[k]
        labelled.append((lab, np.stack([c + delta, c - delta]) if lab != 70 else c[None, :]))
    t = Table(conn, "ties", interleave(rng, labelled, null_rows=False), d)
    report = Report()
    try:
        for nbrs in (1, 2, 3, 5):
            rows, refrows, _ = check_health(conn, t, report, "ties, neighbours %d" % nbrs, neighbours=nbrs)
            byl = {r["cluster"]: r for r in rows}
            check(byl[10]["nearest_cluster"] == 20, "cluster 10 (four neighbours at 2): nearest %r, expected 20"
                  % byl[10]["nearest_cluster"])
            check(byl[40]["nearest_cluster"] == 10 and byl[60]["nearest_cluster"] == 20,
                  "ties: nearest of 40 = %r (expected 10), of 60 = %r (expected 20)"
                  % (byl[40]["nearest_cluster"], byl[60]["nearest_cluster"]))
        print("    %s" % report.line())
    finally:
        t.drop(conn)


TEXT_LABELS = ["apple", "Banana", "zeta", "\u00e9mile", "\u03a9mega", "\u4e2d\u6587", "a b", "Z", "\u00e4", "apple pie"]


def test_text_labels(conn, rng):
    require_functions(conn)
    (enc,) = query_one(conn, "SHOW server_encoding")
    check(enc.upper() in ("UTF8", "UTF-8"), "the database encoding is %s; this test needs UTF8" % enc)
    collate = None
    if query(conn, "SELECT 1 FROM pg_collation WHERE collname = 'und-x-icu'"):
        collate = "und-x-icu"  # a collation whose order is not byte order
    d = 16
    sizes = [1, 2, 5, 9, 13, 20, 30, 4, 7, 16]
    labelled = []
    for lab, n in zip(TEXT_LABELS, sizes):
        labelled.append((lab, blob(rng, d, n)))
    t = Table(conn, "text", interleave(rng, labelled), d, label_type="text", collate=collate)
    report = Report()
    try:
        rows, refrows, _ = check_health(conn, t, report, "text labels%s" % (" (COLLATE %s)" % collate if collate else ""))
        expected_order = sorted(TEXT_LABELS, key=lambda s: s.encode("utf-8"))
        got_order = [r["cluster_text"] for r in rows]
        check(got_order == expected_order, "ranks in byte order: %s, expected %s" % (got_order, expected_order))
        check_health(conn, t, report, "text labels, neighbours 2, order ord", order="ord", neighbours=2)
        rows2, _, _, _ = call_health_query(conn, "SELECT grp, embedding FROM %s ORDER BY id" % t.name)
        clusters, keys = t.clusters()
        compare_health(rows2, ref.health(clusters, keys=keys), {}, report, "cluster_health_query, text labels")
        (s,), _, _, _ = call_health(conn, t, fn="cluster_health_summary")
        compare_summary(s, refrows, report, "summary, text labels")
        print("    %s%s" % (report.line(), "; label column COLLATE %s" % collate if collate else ""))
    finally:
        t.drop(conn)


def test_text_label_ties(conn, rng):
    require_functions(conn)
    d = 4
    p0 = dyadic_point(rng, d)
    e = np.eye(d, dtype=np.float32)
    # "b" at p0; "\u00e9" (bytes C3 A9) and "z" both at distance 2: the tie goes to "z" (smaller bytes)
    labelled = [("b", np.stack([p0 + 0.5 * e[2], p0 - 0.5 * e[2]])),
                ("\u00e9", np.stack([p0 + 2 * e[0]])),
                ("z", np.stack([p0 - 2 * e[0]])),
                ("A", np.stack([p0 + 8 * e[1]]))]
    t = Table(conn, "textties", interleave(rng, labelled, null_rows=False), d, label_type="text")
    report = Report()
    try:
        rows, _, _ = check_health(conn, t, report, "text ties", neighbours=1)
        byt = {r["cluster_text"]: r for r in rows}
        check(byt["b"]["nearest_cluster_text"] == "z" and byt["b"]["nearest_cluster"] == 3,
              "tie between 'z' and '\u00e9': nearest %r (rank %r), expected 'z' (rank 3)"
              % (byt["b"]["nearest_cluster_text"], byt["b"]["nearest_cluster"]))
        print("    %s" % report.line())
    finally:
        t.drop(conn)


def three_blobs(rng, d):
    """Thirty members in three sub-blobs on a line (L, M, R)."""
    u = np.zeros(d)
    u[0] = 1.0
    base = rng.standard_normal(d) * 3
    parts = []
    for shift in (-3.0, 0.0, 3.0):
        parts.append(base + shift * u + rng.standard_normal((10, d)) * 0.4)
    return [np.asarray(x, dtype=np.float32) for x in parts]


def split_of(members):
    rows = ref.health([(1, members)])
    v = rows[0]["values"]
    return (v["split_gain"], v["split_balance"]), ref.two_means_near_tie(rows[0]["aux"], 1e-6)


def order_case(rng, d):
    """Rows of two clusters whose first cluster's two-means result differs
    clearly between ctid order (first from L, last from R) and ord order
    (first from L, last from M; ord has ties, broken by ctid)."""
    for _ in range(100):
        L, M, R = three_blobs(rng, d)
        other = blob(rng, d, 15)
        rows = [(1, x, None) for x in np.concatenate([L, M, R])] + [(2, x, None) for x in other]
        body = list(range(1, 29))
        rng.shuffle(body)
        perm = [0] + body + [29]
        rows = [rows[i] for i in perm] + rows[30:]
        n = len(rows)
        ords = [int(x) for x in rng.integers(10, 20, n)]
        ords[0] = 0
        m_pos = next(i for i, (lab, x, _) in enumerate(rows) if lab == 1 and any(np.array_equal(x, y) for y in M))
        ords[m_pos] = 100
        rows = [(lab, x, o) for (lab, x, _), o in zip(rows, ords)]
        members = [(o, i, x) for i, (lab, x, o) in enumerate(rows) if lab == 1]
        by_ctid = np.stack([x for _, _, x in members]).astype(np.float64)
        by_ord = np.stack([x for _, _, x in sorted(members, key=lambda t: (t[0], t[1]))]).astype(np.float64)
        (g1, b1), tie1 = split_of(by_ctid)
        (g2, b2), tie2 = split_of(by_ord)
        if not tie1 and not tie2 and (abs(g1 - g2) > 0.02 or b1 != b2):
            return rows
    raise TestFailure("could not construct a cluster whose two-means result depends on the member order")


def test_order_column(conn, rng):
    require_functions(conn)
    d = 8
    rows = order_case(rng, d)
    n = len(rows)
    t = Table(conn, "order", rows, d, ord2=list(rng.permutation(n).astype(float)))
    report = Report()
    try:
        r_ctid, ref_ctid, _ = check_health(conn, t, report, "ctid order")
        r_ord, ref_ord, _ = check_health(conn, t, report, "order_column ord", order="ord")
        a = ref_ctid[0]["values"]
        b = ref_ord[0]["values"]
        check(abs(a["split_gain"] - b["split_gain"]) > 0.02 or a["split_balance"] != b["split_balance"],
              "construction: the reference's split columns do not change with the order")
        check(any(abs(r_ctid[0][k] - r_ord[0][k]) > 1e-6 for k in ("split_gain", "split_separation", "split_balance")),
              "split columns equal in ctid and ord order: member order is not honoured")
        # the same through cluster_health_query: with an order key, and by the query's output order
        rows_q, _, _, _ = call_health_query(conn, "SELECT grp, embedding, ord2 FROM %s" % t.name)
        clusters, keys = t.clusters(order="ord2")
        compare_health(rows_q, ref.health(clusters, keys=keys), {}, report, "cluster_health_query with an order key")
        check_health(conn, t, report, "order_column ord2 (float8)", order="ord2")
        seq = sorted(range(n), key=lambda i: -t.ord2[i])
        rows_q, _, _, _ = call_health_query(conn, "SELECT grp, embedding FROM %s ORDER BY ord2 DESC" % t.name)
        clusters, keys = t.clusters(sequence=seq)
        compare_health(rows_q, ref.health(clusters, keys=keys), {}, report, "cluster_health_query in output order")
        print("    %s" % report.line())
    finally:
        t.drop(conn)


def test_rank_max_members(conn, rng):
    require_functions(conn)
    d = 8
    sizes = {1: 5, 2: 30, 3: 40, 4: 8, 5: 21, 6: 20}
    labelled = [(lab, blob(rng, d, n)) for lab, n in sizes.items()]
    t = Table(conn, "rank", interleave(rng, labelled), d)
    report = Report()
    try:
        rows, _, notices = check_health(conn, t, report, "rank_max_members 20", rank_max_members=20,
                                        progress=False)
        refused = [r["cluster"] for r in rows if r["n"] > 20]
        check(sorted(refused) == [2, 3, 5], "construction: refused %s" % refused)
        for r in rows:
            if r["n"] > 20:
                check(r["effective_rank"] is None, "cluster %d (n %d > 20): effective_rank %r, expected NULL"
                      % (r["cluster"], r["n"], r["effective_rank"]))
            else:
                check(r["effective_rank"] is not None, "cluster %d (n %d): effective_rank NULL" % (r["cluster"], r["n"]))

        def about_rank(m):  # (progress => false: no progress NOTICEs)
            low = m.lower()
            return "rank" in low or "refus" in low

        rel = [m for m in notices if about_rank(m)]
        check(len(rel) == 1, "expected one NOTICE about the refused clusters, got %d: %s" % (len(rel), notices))
        check("NOTICE" in rel[0], "not a NOTICE: %r" % rel[0])
        import re
        check(re.search(r"\b3\b", rel[0]) is not None, "the NOTICE does not say 3 clusters: %r" % rel[0])
        _, _, notices = check_health(conn, t, report, "rank_max_members default", progress=False)
        rel = [m for m in notices if about_rank(m)]
        check(not rel, "NOTICE about refused clusters although none was refused: %s" % rel)
        rows, _, notices = check_health(conn, t, report, "rank_max_members 40", rank_max_members=40)
        check(all(r["effective_rank"] is not None for r in rows), "n = 40 <= rank_max_members 40 refused")
        print("    %s" % report.line())
    finally:
        t.drop(conn)


BAD_PARAMS = [("outlier_z", -0.5), ("outlier_z", float("nan")), ("dup_cos", 0.0), ("dup_cos", -0.1),
              ("dup_cos", 1.0000001), ("dup_cos", float("nan")), ("neighbours", 0), ("neighbours", -3),
              ("sigma_bins", 1), ("sigma_bins", 0), ("entropy_bins", 1), ("rank_max_members", 1),
              ("rank_max_members", -5)]


def test_parameter_errors(conn, rng):
    require_functions(conn)
    t = Table(conn, "params", interleave(rng, [(1, blob(rng, 4, 6)), (2, blob(rng, 4, 4))]), 4)
    try:
        problems = []
        for name, value in BAD_PARAMS:
            calls = (("cluster_health", lambda: call_health(conn, t, **{name: value})),
                     ("cluster_health_summary", lambda: call_health(conn, t, fn="cluster_health_summary",
                                                                    **{name: value})),
                     ("cluster_health_query", lambda: call_health_query(conn, "SELECT grp, embedding FROM %s" % t.name,
                                                                        **{name: value})))
            for fn, call in calls:
                code, msg = sql_error_code(call)
                if code != "22023":
                    problems.append("%s(%s => %r): %s" % (fn, name, value, "no error" if code is None
                                                          else "SQLSTATE %s (%s)" % (code, msg)))
        check(not problems, "%d calls did not fail with invalid_parameter_value (22023): %s"
              % (len(problems), "; ".join(problems[:8])))
        # the boundary values are valid
        call_health(conn, t, outlier_z=0.0, dup_cos=1.0, neighbours=1, sigma_bins=2, entropy_bins=2,
                    rank_max_members=2)
    finally:
        t.drop(conn)


def test_query_equals_table(conn, rng):
    require_functions(conn)
    d = 16
    labelled = [(int(l), blob(rng, d, int(n))) for l, n in zip(rng.permutation(50)[:8], rng.integers(1, 40, 8))]
    t = Table(conn, "query", interleave(rng, labelled), d)
    report = Report()
    try:
        for params in ({}, dict(neighbours=2, dup_cos=0.5, sigma_bins=33)):
            a, refrows, _ = check_health(conn, t, report, "table %s" % params, **params)
            b, _, _, _ = call_health_query(conn, "SELECT grp, embedding FROM %s ORDER BY id" % t.name, **params)
            compare_health(b, refrows, params, report, "query %s" % params)
            for x, y in zip(a, b):
                for col in HEALTH_COLUMNS:
                    u, w = x[col], y[col]
                    same = (u is None and w is None) or (u is not None and w is not None
                                                         and abs(u - w) <= 1e-12 * max(1.0, abs(u))) \
                        if not isinstance(u, str) else u == w
                    check(same, "cluster %r: %s = %r from the table, %r from the query" % (x["cluster"], col, u, w))
            sa, _, _, _ = call_health(conn, t, fn="cluster_health_summary", **params)
            compare_summary(sa[0], refrows, report, "summary %s" % params)
        print("    %s" % report.line())
    finally:
        t.drop(conn)


def test_summary_vs_sklearn(conn, rng):
    require_functions(conn)
    skm = sklearn_metrics()
    report = Report()
    for d, k in ((8, 10), (64, 6)):
        labelled = [(i * 2 + 1, blob(rng, d, int(rng.integers(2, 60)))) for i in range(k)]
        t = Table(conn, "summary", interleave(rng, labelled), d)
        try:
            for params in ({}, dict(neighbours=1)):
                (s,), _, _, _ = call_health(conn, t, fn="cluster_health_summary", **params)
                clusters, keys = t.clusters()
                rows = ref.health(clusters, keys=keys, **params)
                compare_summary(s, rows, report, "summary d %d %s" % (d, params))
                X = np.concatenate([m for _, m in clusters])
                lab = np.concatenate([[l] * len(m) for l, m in clusters])
                db = skm.davies_bouldin_score(X, lab)
                ch = skm.calinski_harabasz_score(X, lab)
                check(abs(s["davies_bouldin"] - db) <= 1e-8 * db,
                      "d %d: davies_bouldin %r, sklearn %r" % (d, s["davies_bouldin"], db))
                check(abs(s["calinski_harabasz"] - ch) <= 1e-9 * ch,
                      "d %d: calinski_harabasz %r, sklearn %r" % (d, s["calinski_harabasz"], ch))
        finally:
            t.drop(conn)
    # every cluster a singleton (K = N): calinski_harabasz NULL; davies_bouldin 0 as sklearn's
    labelled = [(i, blob(rng, 4, 1)) for i in range(5)]
    t = Table(conn, "summary", interleave(rng, labelled, null_rows=False), 4)
    try:
        (s,), _, _, _ = call_health(conn, t, fn="cluster_health_summary")
        clusters, keys = t.clusters()
        compare_summary(s, ref.health(clusters, keys=keys), report, "K = N")
        check(s["calinski_harabasz"] is None, "K = N: calinski_harabasz %r, expected NULL" % s["calinski_harabasz"])
    finally:
        t.drop(conn)
    # every cluster collapsed, K < N: calinski_harabasz 1.0 as sklearn's
    labelled = [(i, np.repeat(blob(rng, 4, 1), i + 2, axis=0)) for i in range(3)]
    t = Table(conn, "summary", interleave(rng, labelled, null_rows=False), 4)
    try:
        (s,), _, _, _ = call_health(conn, t, fn="cluster_health_summary")
        clusters, keys = t.clusters()
        compare_summary(s, ref.health(clusters, keys=keys), report, "all collapsed")
        X = np.concatenate([m for _, m in clusters])
        lab = np.concatenate([[l] * len(m) for l, m in clusters])
        check(s["calinski_harabasz"] == 1.0 == skm.calinski_harabasz_score(X, lab),
              "all collapsed: calinski_harabasz %r, expected 1.0" % s["calinski_harabasz"])
    finally:
        t.drop(conn)
    print("    %s" % report.line())


def test_split_silhouette_vs_sklearn(conn, rng):
    require_functions(conn)
    skm = sklearn_metrics()
    checked = exempt = 0
    for d in (8, 64):
        labelled = [(i, blob(rng, d, int(n))) for i, n in enumerate([3, 4, 7, 15, 30, 50, 80])]
        labelled.append((99, cone(rng, d, 25)))
        t = Table(conn, "silhouette", interleave(rng, labelled), d)
        try:
            rows, _, _, _ = call_health(conn, t)
            clusters, keys = t.clusters()
            refrows = ref.health(clusters, keys=keys)
            for got, r in zip(rows, refrows):
                tm = r["aux"]["two_means"]
                if tm is None:
                    continue
                labels = tm["in_a"].astype(int)
                n = len(labels)
                if not (2 <= len(set(labels.tolist())) <= n - 1):
                    continue
                if ref.two_means_near_tie(r["aux"], BAND):
                    exempt += 1
                    continue
                M = r["X"]
                exact = skm.silhouette_score(r["aux"]["pairs"]["D"], labels, metric="precomputed")
                plain = skm.silhouette_score(M, labels)
                g = got["split_silhouette"]
                check(g is not None and abs(g - exact) <= 1e-9 * abs(exact) + 1e-12,
                      "d %d cluster %r: split_silhouette %r, sklearn (exact distances) %r"
                      % (d, r["label"], g, exact))
                check(abs(g - plain) <= 1e-6, "d %d cluster %r: split_silhouette %r, sklearn %r"
                      % (d, r["label"], g, plain))
                checked += 1
        finally:
            t.drop(conn)
    check(checked >= 8, "only %d clusters had a two-means split to check" % checked)
    print("    %d clusters checked against silhouette_score, %d exempt (near tie)" % (checked, exempt))


def plan_nodes(plan):
    found = []

    def walk(node):
        found.append(node.get("Node Type", "") + "/" + node.get("Partial Mode", ""))
        for child in node.get("Plans", []):
            walk(child)
    walk(plan)
    return found


def launched_workers(node):
    total = node.get("Workers Launched", 0)
    for child in node.get("Plans", []):
        total += launched_workers(child)
    return total


STATS_SQL = ("SELECT grp, (s).n, (s).centroid::text, (s).centroid_norm, (s).inertia, (s).cohesion, (s).mean_norm, "
             "(s).norm_cv, (s).embedding_quality FROM (SELECT grp, cluster_stats(embedding) AS s FROM %s "
             "WHERE grp IS NOT NULL GROUP BY grp) q ORDER BY grp")


NULL_GROUP = 8  # a label whose rows all have a NULL vector


def compare_stats(rows, groups, what):
    empty = [r for r in rows if r[0] == NULL_GROUP]
    rows = [r for r in rows if r[0] != NULL_GROUP]
    check(len(empty) == 1 and empty[0][1] in (None, 0) and all(x is None for x in empty[0][2:]),
          "%s: group %d (only NULL vectors): %r, expected a NULL result (or n = 0 and NULLs)"
          % (what, NULL_GROUP, empty))
    check(len(rows) == len(groups), "%s: %d groups, expected %d" % (what, len(rows), len(groups)))
    problems = []
    for row, (lab, M) in zip(rows, groups):
        e = ref.stats_aggregate(M)
        mn = e["mean_norm"]
        got = dict(zip(("grp",) + ref.STATS_COLUMNS, row))
        if got["grp"] != lab or got["n"] != e["n"]:
            problems.append("group %r: grp %r n %r, expected n %d" % (lab, got["grp"], got["n"], e["n"]))
            continue
        c = parse_cvec(got["centroid"]).astype(np.float64)
        c32 = e["centroid"].astype(np.float32)
        tol = np.spacing(np.abs(c32)).astype(np.float64) + 1e-12 * mn
        if c.shape != c32.shape or np.any(np.abs(c - c32.astype(np.float64)) > tol):
            problems.append("group %r: centroid off by more than one float32 ulp" % lab)
        for col in ("centroid_norm", "mean_norm"):
            if not close(got[col], e[col], RTOL, ATOL * mn):
                problems.append("group %r: %s = %r, reference %r" % (lab, col, got[col], e[col]))
        if not close(got["inertia"], e["inertia"], RTOL, ATOL * e["n"] * mn * mn):
            problems.append("group %r: inertia = %r, reference %r" % (lab, got["inertia"], e["inertia"]))
        for col in ("cohesion", "norm_cv", "embedding_quality"):
            if e[col] is None or got[col] is None:
                if not (e[col] is None and got[col] is None):
                    problems.append("group %r: %s = %r, reference %r" % (lab, col, got[col], e[col]))
            elif not close(got[col], e[col], RTOL,
                           ATOL * (max(1.0, mn / e["centroid_norm"]) if col == "cohesion" else 1.0)):
                problems.append("group %r: %s = %r, reference %r" % (lab, col, got[col], e[col]))
    check(not problems, "%s: %s" % (what, "; ".join(problems[:6])))


def test_cluster_stats_serial_and_parallel(conn, rng):
    require_functions(conn, ("cluster_stats",))
    d = 16
    labelled = [(i, blob(rng, d, int(n))) for i, n in enumerate([4000, 6000, 3000, 5000, 1])]
    z = labelled[0][1]
    z[17] = 0.0                                         # a zero member
    x = blob(rng, d, 3)
    labelled.append((5, np.concatenate([x, -x])))       # centroid exactly 0: cohesion NULL
    labelled.append((6, np.repeat(blob(rng, d, 1), 500, axis=0)))  # identical members
    labelled.append((7, cone(rng, d, 2500)))
    rows = interleave(rng, labelled)
    for _ in range(3):  # states that stay NULL, in the workers too
        rows.insert(int(rng.integers(0, len(rows) + 1)), (NULL_GROUP, None, 0))
    t = Table(conn, "stats", rows, d)
    try:
        groups, _ = t.clusters()
        query(conn, "SET max_parallel_workers_per_gather = 0")
        serial = query(conn, STATS_SQL % t.name)
        compare_stats(serial, groups, "serial")
        for setting in ("parallel_setup_cost = 0", "parallel_tuple_cost = 0", "min_parallel_table_scan_size = 0",
                        "max_parallel_workers_per_gather = 2"):
            query(conn, "SET " + setting)
        (plan,) = query_one(conn, "EXPLAIN (FORMAT JSON) " + STATS_SQL % t.name)
        if isinstance(plan, str):
            plan = json.loads(plan)
        nodes = plan_nodes(plan[0]["Plan"])
        check("Aggregate/Partial" in nodes, "no Partial Aggregate in the plan (is cluster_stats parallel safe, "
              "with a combine function?): %s" % nodes)
        (analyze,) = query_one(conn, "EXPLAIN (ANALYZE, FORMAT JSON) " + STATS_SQL % t.name)
        if isinstance(analyze, str):
            analyze = json.loads(analyze)
        workers = launched_workers(analyze[0]["Plan"])
        check(workers > 0, "the parallel plan launched no workers")
        parallel = query(conn, STATS_SQL % t.name)
        compare_stats(parallel, groups, "parallel")
        for a, b in zip(serial, parallel):
            for k, (u, w) in enumerate(zip(a, b)):
                if isinstance(u, float):
                    check(abs(u - w) <= 1e-12 * max(1.0, abs(u)), "group %r: column %d serial %r, parallel %r"
                          % (a[0], k, u, w))
        print("    parallel plan: %d workers launched" % workers)
    finally:
        t.drop(conn)


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
        except psycopg2.Error as e:
            failed += 1
            print("FAIL %s: %s: %s" % (name, type(e).__name__, " ".join(str(e).split())))
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
