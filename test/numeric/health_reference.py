#!/usr/bin/python3
"""An independent float64 numpy reference of the cluster statistics.

Written from /work/shared/STATISTICS.md alone (not from the C code): the 38
per-cluster columns of cluster_health, the summary row of
cluster_health_summary and the columns of the cluster_stats(cvec) aggregate.
Every definition is followed literally, with the degeneracy rules (eps = 1e-6
and the scales STATISTICS.md names) and its NULL rules (None is SQL NULL).

Besides the values, every cluster carries "aux": the float64 items behind
each threshold count, the sigma and entropy histograms' edges and the
two-means near ties, so that a test can accept the outcomes that lie inside
a band around a threshold (test_cluster_health.py does).

Entry points:
    health(clusters, **params)   -> list of per-cluster dicts (label order)
    summary(clusters, rows)      -> the summary dict
    stats_aggregate(X)           -> the cluster_stats(cvec) columns
    sigma_dependent(...)         -> columns 26, 28, 30-32 at another sigma
A "clusters" argument is a list of (label, X) in label order, X an n x d
array of the members in member order (float32 values, read as float64).

Run it (/usr/bin/python3 test/numeric/health_reference.py) for a self-test
against hand-computed cases, identities and scikit-learn.
"""

import math

import numpy as np

EPS = 1e-6

COLUMNS = (
    "n", "centroid_norm", "inertia", "mean_dist", "spread", "skew", "kurtosis", "radius",
    "cohesion", "outlier_ratio", "core_periphery_ratio", "mean_norm", "norm_cv",
    "embedding_quality", "novelty", "between_ss",
    "split_gain", "split_balance", "split_separation",
    "mean_pairwise_dist", "sigma", "mean_pairwise_cos", "redundancy", "redundant_members",
    "breadth", "local_density", "dist_entropy", "entanglement", "split_silhouette",
    "potential_depth", "curvature", "escape_probability",
    "nearest_cluster", "nearest_dist", "db_ratio", "neighbour_relevance", "centroid_silhouette",
    "effective_rank",
)
assert len(COLUMNS) == 38

DEFAULTS = dict(outlier_z=2.0, dup_cos=0.95, neighbours=5, sigma_bins=256,
                entropy_bins=20, rank_max_members=2000)

# Columns NULL for a collapsed cluster (STATISTICS.md, "Degenerate quantities").
COLLAPSED_NULL = ("skew", "kurtosis", "split_gain", "split_balance", "split_separation",
                  "split_silhouette", "entanglement", "potential_depth", "curvature",
                  "escape_probability", "effective_rank")

SUMMARY_COLUMNS = ("k", "n", "davies_bouldin", "calinski_harabasz", "cohesion", "centroid_silhouette")
STATS_COLUMNS = ("n", "centroid", "centroid_norm", "inertia", "cohesion", "mean_norm", "norm_cv",
                 "embedding_quality")


def check_params(outlier_z, dup_cos, neighbours, sigma_bins, entropy_bins, rank_max_members):
    """Raise ValueError for a parameter outside its valid range."""
    if not (outlier_z >= 0):
        raise ValueError("outlier_z must be >= 0")
    if not (0 < dup_cos <= 1):
        raise ValueError("dup_cos must be in (0, 1]")
    if not (neighbours >= 1):
        raise ValueError("neighbours must be >= 1")
    if not (sigma_bins >= 2):
        raise ValueError("sigma_bins must be >= 2")
    if not (entropy_bins >= 2):
        raise ValueError("entropy_bins must be >= 2")
    if not (rank_max_members >= 2):
        raise ValueError("rank_max_members must be >= 2")


def centroid(X):
    """x_1 + mean(x_i - x_1): identical members give c equal to them bit for bit."""
    X = np.asarray(X, dtype=np.float64)
    return X[0] + (X - X[0]).mean(axis=0)


def norm(v):
    v = np.asarray(v, dtype=np.float64)
    return float(np.sqrt(np.dot(v, v)))


def row_norms(X):
    return np.sqrt(np.einsum("ij,ij->i", X, X))


def l2(a, b):
    """Euclidean distance from the difference, squared differences summed directly."""
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    return float(np.sqrt(np.dot(diff, diff)))


def dists_to(X, y):
    diff = X - y
    return np.sqrt(np.einsum("ij,ij->i", diff, diff))


def cos_or_zero(a, b, na, nb):
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.dot(a, b)) / (na * nb)


def pair_index(n):
    return np.triu_indices(n, k=1)


def pairwise_distance_matrix(X):
    """n x n Euclidean distances from differences (exactly 0 on the diagonal)."""
    n = X.shape[0]
    D = np.zeros((n, n))
    for i in range(n):
        diff = X - X[i]
        D[i] = np.sqrt(np.einsum("ij,ij->i", diff, diff))
    return D


def pairwise_cos_matrix(X, norms):
    """n x n cosines, 0 wherever a member is the zero vector."""
    safe = np.where(norms > 0, norms, 1.0)
    U = X / safe[:, None]
    U[norms == 0] = 0.0
    return U @ U.T


# ---------------------------------------------------------------------------
# Section 1: centroid family
# ---------------------------------------------------------------------------

def centroid_family(X, c, mean_norm_scale_g=None, g=None):
    """Columns 1-16 (novelty and between_ss need g; None skips them) plus
    the quantities other sections reuse."""
    n, d = X.shape
    r = dists_to(X, c)
    norms = row_norms(X)
    out = {}
    aux = {}
    mu = float(r.mean())
    s = float(np.sqrt(np.mean((r - mu) ** 2)))
    radius = float(r.max())
    mean_norm = float(norms.mean())
    cn = norm(c)
    collapsed = radius <= EPS * mean_norm
    s_degenerate = s <= EPS * mu
    c_zero = cn <= EPS * mean_norm
    aux["degenerate"] = {
        "collapsed": (radius, mean_norm),
        "s_zero": (s, mu),
        "c_zero": (cn, mean_norm),
    }
    out["n"] = n
    out["centroid_norm"] = cn
    out["inertia"] = float(np.sum(r ** 2))
    out["mean_dist"] = mu
    out["spread"] = s
    m2 = float(np.mean((r - mu) ** 2))
    m3 = float(np.mean((r - mu) ** 3))
    m4 = float(np.mean((r - mu) ** 4))
    if collapsed or s_degenerate:
        out["skew"] = None
        out["kurtosis"] = None
    else:
        out["skew"] = m3 / m2 ** 1.5
        out["kurtosis"] = m4 / m2 ** 2 - 3.0
    out["radius"] = radius
    if c_zero:
        out["cohesion"] = None
    else:
        out["cohesion"] = float(np.mean([cos_or_zero(x, c, nx, cn) for x, nx in zip(X, norms)]))
    aux["r"] = r
    aux["mu"] = mu
    aux["s"] = s
    aux["collapsed"] = collapsed
    aux["s_degenerate"] = s_degenerate
    out["mean_norm"] = mean_norm
    out["norm_cv"] = None if mean_norm == 0.0 else float(np.sqrt(np.mean((norms - mean_norm) ** 2))) / mean_norm
    nz = norms > 0
    m = int(nz.sum())
    if m == 0:
        out["embedding_quality"] = None
    else:
        U = X[nz] / norms[nz][:, None]
        out["embedding_quality"] = norm(U.sum(axis=0) / m)
    if g is not None:
        gn = norm(g)
        g_zero = gn <= EPS * mean_norm_scale_g
        aux["degenerate"]["g_zero"] = (gn, mean_norm_scale_g)
        if c_zero or g_zero:
            out["novelty"] = None
        else:
            out["novelty"] = 1.0 - float(np.dot(c, g)) / (cn * gn)
        out["between_ss"] = n * float(np.sum((c - g) ** 2))
    aux["norms"] = norms
    return out, aux


def threshold_columns(out, aux, outlier_z):
    """outlier_ratio and core_periphery_ratio, with their threshold items."""
    r, mu, s, n = aux["r"], aux["mu"], aux["s"], len(aux["r"])
    scale = out["mean_norm"]
    items = aux.setdefault("items", {})
    if aux["collapsed"] or aux["s_degenerate"]:
        out["outlier_ratio"] = 0.0
        out["core_periphery_ratio"] = 1.0
        return
    thr = mu + outlier_z * s
    out["outlier_ratio"] = float(np.sum(r > thr)) / n
    items["outlier_ratio"] = [dict(values=r, threshold=thr, op=">", scale=scale)]
    core = int(np.sum(r <= mu - s))
    periphery = int(np.sum(r >= mu + s))
    out["core_periphery_ratio"] = None if periphery == 0 else core / periphery
    items["core_periphery_ratio"] = [dict(values=r, threshold=mu - s, op="<=", scale=scale),
                                     dict(values=r, threshold=mu + s, op=">=", scale=scale)]


# ---------------------------------------------------------------------------
# Section 2: two-means
# ---------------------------------------------------------------------------

def two_means(X):
    """Three Lloyd iterations seeded by the first and last member.

    Returns (in_a, a, b, near_ties) where in_a is the third assignment,
    a and b the centres after its update, and near_ties the list of
    (iteration, member, d_a, d_b, a_equals_b) for every member of every
    iteration, so that a test can find the members near the tie."""
    a = X[0].copy()
    b = X[-1].copy()
    trace = []
    in_a = None
    for it in range(3):
        da2 = np.einsum("ij,ij->i", X - a, X - a)
        db2 = np.einsum("ij,ij->i", X - b, X - b)
        in_a = da2 <= db2  # tie: a
        trace.append((np.sqrt(da2), np.sqrt(db2), bool(np.array_equal(a, b))))
        if in_a.any():
            a = centroid(X[in_a])
        if (~in_a).any():
            b = centroid(X[~in_a])
    return in_a, a, b, trace


def two_means_columns(X, out, aux):
    n = X.shape[0]
    if n < 2 or aux["collapsed"]:
        out["split_gain"] = out["split_balance"] = out["split_separation"] = None
        aux["two_means"] = None
        return
    in_a, a, b, trace = two_means(X)
    inertia2 = float(np.sum((X[in_a] - a) ** 2)) + float(np.sum((X[~in_a] - b) ** 2))
    inertia = out["inertia"]
    out["split_gain"] = None if inertia == 0.0 else 1.0 - inertia2 / inertia
    na = int(in_a.sum())
    out["split_balance"] = min(na, n - na) / n
    mu = out["mean_dist"]
    out["split_separation"] = None if mu == 0.0 else l2(a, b) / mu
    aux["two_means"] = dict(in_a=in_a, a=a, b=b, trace=trace, inertia2=inertia2)


def two_means_near_tie(aux, band):
    """True when some member of some iteration has |d_a - d_b| <= band * max:
    the split columns are then exempt (a == b bit for bit is deterministic)."""
    tm = aux.get("two_means")
    if tm is None:
        return False
    for da, db, same in tm["trace"]:
        if same:
            continue
        m = np.maximum(da, db)
        if np.any(np.abs(da - db) <= band * m):
            return True
    return False


# ---------------------------------------------------------------------------
# Section 3: pairwise
# ---------------------------------------------------------------------------

def sigma_histogram(pd, radius, bins):
    """The histogram median of STATISTICS.md #21 and the bin width."""
    if radius == 0.0:
        return 0.0, 0.0
    w = 2.0 * radius / bins
    idx = np.minimum(np.floor(pd / w), bins - 1).astype(np.int64)
    counts = np.bincount(idx, minlength=bins)
    cum = np.cumsum(counts)
    half = len(pd) / 2.0
    b = int(np.nonzero(cum >= half)[0][0])
    return (b + 0.5) * w, w


def entropy_of_counts(counts, bins):
    total = counts.sum()
    p = counts[counts > 0] / total
    return float(-np.sum(p * np.log(p)) / math.log(bins))


def dist_entropy(pd, bins):
    lo, hi = float(pd.min()), float(pd.max())
    if hi == lo:
        return 0.0, lo, hi, 0.0
    we = (hi - lo) / bins
    idx = np.minimum(np.floor((pd - lo) / we), bins - 1).astype(np.int64)
    counts = np.bincount(idx, minlength=bins)
    return entropy_of_counts(counts, bins), lo, hi, we


def split_silhouette(D, in_a):
    """scikit-learn's silhouette with the two-means sides, written out."""
    n = len(in_a)
    na = int(in_a.sum())
    if na == 0 or na == n:
        return None
    total = 0.0
    for i in range(n):
        same = in_a == in_a[i]
        size = int(same.sum())
        if size == 1:
            continue  # alone on its side: 0
        a_i = (D[i, same].sum()) / (size - 1)  # D[i, i] = 0
        b_i = D[i, ~same].mean()
        m = max(a_i, b_i)
        if m == 0.0:
            continue
        total += (b_i - a_i) / m
    return total / n


def pairwise_columns(X, out, aux, dup_cos, sigma_bins, entropy_bins):
    n = X.shape[0]
    names = ("mean_pairwise_dist", "sigma", "mean_pairwise_cos", "redundancy", "redundant_members",
             "breadth", "local_density", "dist_entropy", "entanglement", "split_silhouette")
    if n < 2:
        for k in names:
            out[k] = None
        aux["pairs"] = None
        return
    D = pairwise_distance_matrix(X)
    norms = aux["norms"]
    C = pairwise_cos_matrix(X, norms)
    iu = pair_index(n)
    pd = D[iu]
    pc = C[iu]
    P = len(pd)
    radius = out["radius"]
    collapsed = aux["collapsed"]
    items = aux.setdefault("items", {})
    out["mean_pairwise_dist"] = float(pd.mean())
    out["mean_pairwise_cos"] = float(pc.mean())
    out["redundancy"] = float(np.sum(pc >= dup_cos)) / P
    items["redundancy"] = [dict(values=pc, threshold=dup_cos, op=">=", scale=1.0)]
    Cm = C.copy()
    np.fill_diagonal(Cm, -np.inf)
    best = Cm.max(axis=1)
    out["redundant_members"] = float(np.sum(best >= dup_cos)) / n
    items["redundant_members"] = [dict(values=best, threshold=dup_cos, op=">=", scale=1.0)]
    out["breadth"] = float(pd.max())
    if collapsed:
        sigma, w = 0.0, 0.0
        out["dist_entropy"] = 0.0
        ent = None
    else:
        sigma, w = sigma_histogram(pd, radius, sigma_bins)
        out["dist_entropy"], lo, hi, we = dist_entropy(pd, entropy_bins)
        ent = dict(lo=lo, hi=hi, we=we, bins=entropy_bins)
    out["sigma"] = sigma
    aux["pairs"] = dict(pd=pd, pc=pc, D=D, sigma_w=w, sigma_bins=sigma_bins, entropy=ent)
    tm = aux.get("two_means")
    out["split_silhouette"] = None if (collapsed or tm is None) else split_silhouette(D, tm["in_a"])


# ---------------------------------------------------------------------------
# Sections 3 (pass 2) and 4: everything that depends on sigma
# ---------------------------------------------------------------------------

def sigma_dependent(X, out, aux, sigma, nearest_dist, K):
    """local_density, entanglement, potential_depth, curvature and
    escape_probability at the given sigma (a test may pass another cluster's
    sigma: the reference accepts a per-cluster sigma).  Returns a dict."""
    n, d = X.shape
    res = {}
    items = {}
    collapsed = aux["collapsed"]
    if n < 2:
        res["local_density"] = None
        res["entanglement"] = None
    elif collapsed:
        res["local_density"] = 1.0
        res["entanglement"] = None
    else:
        pd = aux["pairs"]["pd"]
        res["local_density"] = float(np.sum(pd <= sigma / 2.0)) / len(pd)
        items["local_density"] = [dict(values=pd, threshold=sigma / 2.0, op="<=", scale=out["mean_norm"])]
        res["entanglement"] = None if sigma == 0.0 else float(np.mean(np.exp(-pd ** 2 / (2.0 * sigma ** 2))))
    if collapsed or sigma is None or sigma == 0.0:
        res["potential_depth"] = res["curvature"] = res["escape_probability"] = None
    else:
        r = aux["r"]
        e = np.exp(-r ** 2 / (2.0 * sigma ** 2))
        res["potential_depth"] = float(np.mean(e))
        res["curvature"] = float(np.mean(e * (r ** 2 / (d * sigma ** 2) - 1.0)))
        if K == 1 or nearest_dist is None:
            res["escape_probability"] = None
        else:
            res["escape_probability"] = math.exp(-nearest_dist ** 2 / (8.0 * sigma ** 2))
    return res, items


# ---------------------------------------------------------------------------
# Section 5: neighbours
# ---------------------------------------------------------------------------

def neighbour_order(i, cdist, keys):
    """Other clusters by centroid distance, ties to the smaller label."""
    others = [j for j in range(len(keys)) if j != i]
    return sorted(others, key=lambda j: (cdist[i, j], keys[j]))


def neighbour_columns(i, X, out, aux, ctx, neighbours):
    K = ctx["K"]
    names = ("nearest_cluster", "nearest_dist", "db_ratio", "neighbour_relevance", "centroid_silhouette")
    if K == 1:
        for k in names:
            out[k] = None
        aux["neighbours"] = None
        return
    cdist = ctx["cdist"]
    order = neighbour_order(i, cdist, ctx["keys"])
    j0 = order[0]
    out["nearest_cluster"] = ctx["labels"][j0]
    out["nearest_dist"] = float(cdist[i, j0])
    # db_ratio: coinciding centroids contribute 0
    mus = ctx["mu"]
    mns = ctx["mean_norm"]
    best = -np.inf
    coinciding = []
    for j in range(K):
        if j == i:
            continue
        dij = cdist[i, j]
        scale = max(mns[i], mns[j])
        coinciding.append((dij, scale))
        if dij <= EPS * scale:
            val = 0.0
        else:
            val = (mus[i] + mus[j]) / dij
        best = max(best, val)
    out["db_ratio"] = float(best)
    nb = order[:neighbours]
    C = ctx["centroids"]
    Dn = np.stack([dists_to(X, C[j]) for j in nb], axis=1)
    bmin = Dn.min(axis=1)
    r = aux["r"]
    out["neighbour_relevance"] = float(np.sum(r <= bmin)) / len(r)
    aux.setdefault("items", {})["neighbour_relevance"] = [
        dict(values=r - bmin, threshold=0.0, op="<=", scale=out["mean_norm"], thresholds=bmin)]
    m = np.maximum(bmin, r)
    safe = np.where(m > 0, m, 1.0)
    sil = np.where(m > 0, (bmin - r) / safe, 0.0)
    out["centroid_silhouette"] = float(np.mean(sil))
    aux["neighbours"] = dict(order=order, dists=[float(cdist[i, j]) for j in order], set=nb,
                             coinciding=coinciding)


# ---------------------------------------------------------------------------
# Section 6: effective rank
# ---------------------------------------------------------------------------

def effective_rank(X, c):
    sv = np.linalg.svd(X - c, compute_uv=False)
    total = float(sv.sum())
    if total == 0.0:
        return None
    p = sv / total
    p = p[p > 0]
    return float(math.exp(-np.sum(p * np.log(p))))


# ---------------------------------------------------------------------------
# Everything together
# ---------------------------------------------------------------------------

def health(clusters, outlier_z=2.0, dup_cos=0.95, neighbours=5, sigma_bins=256, entropy_bins=20,
           rank_max_members=2000, keys=None):
    """One dict per cluster (in the order given, which must be label order):
    {"label", "values": {column: value or None}, "aux": {...}}.

    keys: the sort keys of the labels for "tie: smaller label" (default:
    the labels themselves); the test passes ranks for text labels."""
    check_params(outlier_z, dup_cos, neighbours, sigma_bins, entropy_bins, rank_max_members)
    labels = [lab for lab, _ in clusters]
    if keys is None:
        keys = labels
    assert list(keys) == sorted(keys), "clusters must come in label order"
    Xs = [np.asarray(X, dtype=np.float64) for _, X in clusters]
    K = len(Xs)
    allX = np.concatenate(Xs, axis=0)
    g = allX.mean(axis=0)
    all_mean_norm = float(row_norms(allX).mean())
    cents = np.stack([centroid(X) for X in Xs])
    cdist = np.zeros((K, K))
    for i in range(K):
        for j in range(K):
            cdist[i, j] = l2(cents[i], cents[j])
    rows = []
    for X, c in zip(Xs, cents):
        out, aux = centroid_family(X, c, all_mean_norm, g)
        rows.append((out, aux))
    ctx = dict(K=K, cdist=cdist, labels=labels, keys=list(keys), centroids=cents, g=g,
               all_mean_norm=all_mean_norm,
               mu=[o["mean_dist"] for o, _ in rows], mean_norm=[o["mean_norm"] for o, _ in rows])
    result = []
    for i, (X, (out, aux)) in enumerate(zip(Xs, rows)):
        threshold_columns(out, aux, outlier_z)
        two_means_columns(X, out, aux)
        pairwise_columns(X, out, aux, dup_cos, sigma_bins, entropy_bins)
        neighbour_columns(i, X, out, aux, ctx, neighbours)
        sig = out["sigma"]
        dep, items = sigma_dependent(X, out, aux, sig, out["nearest_dist"], K)
        out.update(dep)
        aux.setdefault("items", {}).update(items)
        n = X.shape[0]
        if n < 2 or aux["collapsed"]:
            out["effective_rank"] = None
            aux["rank_refused"] = False
        elif n > rank_max_members:
            out["effective_rank"] = None
            aux["rank_refused"] = True
        else:
            out["effective_rank"] = effective_rank(X, cents[i])
            aux["rank_refused"] = False
        if aux["collapsed"]:
            out["sigma"] = 0.0 if n >= 2 else None
            out["local_density"] = 1.0 if n >= 2 else None
            out["dist_entropy"] = 0.0 if n >= 2 else None
            out["core_periphery_ratio"] = 1.0
            for k in COLLAPSED_NULL:
                out[k] = None
        assert set(out) == set(COLUMNS), set(COLUMNS) ^ set(out)
        result.append(dict(label=labels[i], key=keys[i], values={k: out[k] for k in COLUMNS}, aux=aux,
                           X=X, centroid=cents[i], ctx=ctx))
    return result


def summary(rows):
    """The cluster_health_summary row from the per-cluster rows of health()."""
    K = len(rows)
    N = sum(r["values"]["n"] for r in rows)
    out = {"k": K, "n": N}
    if K < 2:
        out["davies_bouldin"] = None
    else:
        out["davies_bouldin"] = float(np.mean([r["values"]["db_ratio"] for r in rows]))
    if K < 2 or K >= N:
        out["calinski_harabasz"] = None
    else:
        w = sum(r["values"]["inertia"] for r in rows)
        b = sum(r["values"]["between_ss"] for r in rows)
        out["calinski_harabasz"] = 1.0 if w == 0.0 else (b / (K - 1)) / (w / (N - K))
    for col in ("cohesion", "centroid_silhouette"):
        pairs = [(r["values"]["n"], r["values"][col]) for r in rows if r["values"][col] is not None]
        if not pairs:
            out[col] = None
        else:
            out[col] = sum(n * v for n, v in pairs) / sum(n for n, _ in pairs)
    return out


def stats_aggregate(X):
    """The cluster_stats(cvec) columns for one group (order does not matter)."""
    X = np.asarray(X, dtype=np.float64)
    c = centroid(X)
    out, _ = centroid_family(X, c)
    return {"n": out["n"], "centroid": c, "centroid_norm": out["centroid_norm"],
            "inertia": out["inertia"], "cohesion": out["cohesion"], "mean_norm": out["mean_norm"],
            "norm_cv": out["norm_cv"], "embedding_quality": out["embedding_quality"]}


# ---------------------------------------------------------------------------
# Bands: the outcomes a float64 implementation may legitimately differ in
# ---------------------------------------------------------------------------

def count_range(item, band):
    """(certain, possible) counts of an item list: values inside
    band * max(|threshold|, scale) of the threshold may go either way."""
    v = np.asarray(item["values"], dtype=np.float64)
    thr = item["threshold"]
    if "thresholds" in item:  # neighbour_relevance: r_i - min_j ||x_i - c_j|| <= 0
        width = band * np.maximum(np.abs(item["thresholds"]), item["scale"])
    else:
        width = band * max(abs(thr), item["scale"])
    op = item["op"]
    if op == ">":
        sure = v > thr + width
        maybe = v > thr - width
    elif op == ">=":
        sure = v >= thr + width
        maybe = v >= thr - width
    elif op == "<=":
        sure = v <= thr - width
        maybe = v <= thr + width
    else:
        raise ValueError(op)
    return int(sure.sum()), int(maybe.sum())


def edge_ambiguous(values, lo, width, bins, band, scale):
    """Indices of values within band * scale of an inner edge lo + k * width."""
    if width == 0.0:
        return np.zeros(0, dtype=np.int64)
    t = (values - lo) / width
    k = np.round(t)
    inner = (k >= 1) & (k <= bins - 1)
    near = np.abs(values - (lo + k * width)) <= band * scale
    return np.nonzero(inner & near)[0]


def degenerate_ambiguous(aux, band_lo=0.1, band_hi=10.0):
    """Names of the degeneracy tests whose quantity lies between 0.1 eps and
    10 eps of its scale (either outcome is accepted there)."""
    found = []
    for name, (q, scale) in aux["degenerate"].items():
        if band_lo * EPS * scale < q <= band_hi * EPS * scale:
            found.append(name)
    return found


# ---------------------------------------------------------------------------
# Self-test
# ---------------------------------------------------------------------------

def _close(a, b, tol=1e-12):
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= tol * max(1.0, abs(b))


def _selftest():  # noqa: C901 - a list of checks
    import sklearn.metrics as skm
    failures = []

    def expect(cond, msg):
        if not cond:
            failures.append(msg)

    # --- hand-computed: three members on a line, d = 2
    X = np.array([[0.0, 0.0], [2.0, 0.0], [4.0, 0.0]])
    Y = np.array([[10.0, 0.0], [10.0, 2.0]])
    rows = health([(1, X), (2, Y)], sigma_bins=4, entropy_bins=2, neighbours=1)
    v = rows[0]["values"]
    expect(v["n"] == 3, "n")
    expect(_close(v["centroid_norm"], 2.0), "centroid_norm")
    expect(_close(v["inertia"], 8.0), "inertia")
    expect(_close(v["mean_dist"], 4.0 / 3.0), "mean_dist")
    expect(_close(v["spread"], math.sqrt(8.0 / 9.0)), "spread %r" % v["spread"])
    # r = 2, 0, 2; mu = 4/3; deviations 2/3, -4/3, 2/3
    m2 = 8.0 / 9.0
    m3 = (2 * (2 / 3) ** 3 + (-4 / 3) ** 3) / 3
    m4 = (2 * (2 / 3) ** 4 + (4 / 3) ** 4) / 3
    expect(_close(v["skew"], m3 / m2 ** 1.5), "skew")
    expect(_close(v["kurtosis"], m4 / m2 ** 2 - 3), "kurtosis")
    expect(_close(v["radius"], 2.0), "radius")
    # cos(x_i, c): zero member contributes 0; (2,0),(4,0) have cos 1 -> 2/3
    expect(_close(v["cohesion"], 2.0 / 3.0), "cohesion")
    # threshold mu + 2 s = 1.333 + 1.886 = 3.22: none above
    expect(v["outlier_ratio"] == 0.0, "outlier_ratio")
    # core: r <= mu - s = 0.39 -> 1; periphery r >= mu + s = 2.276 -> 0 -> NULL
    expect(v["core_periphery_ratio"] is None, "core_periphery_ratio %r" % v["core_periphery_ratio"])
    expect(_close(v["mean_norm"], 2.0), "mean_norm")
    expect(_close(v["norm_cv"], math.sqrt(8.0 / 3.0) / 2.0), "norm_cv")
    expect(_close(v["embedding_quality"], 1.0), "embedding_quality")
    g = np.array([26.0 / 5.0, 2.0 / 5.0])
    expect(_close(v["novelty"], 1.0 - 2.0 * g[0] / (2.0 * norm(g))), "novelty")
    expect(_close(v["between_ss"], 3 * ((2 - g[0]) ** 2 + g[1] ** 2)), "between_ss")
    # two-means: seeds (0,0) and (4,0); (2,0) ties -> a. it1: a = (1,0), b = (4,0);
    # it2: (2,0) is 1 from a, 2 from b -> a; same after. inertia2 = 1 + 1 + 0 = 2
    expect(_close(v["split_gain"], 1.0 - 2.0 / 8.0), "split_gain %r" % v["split_gain"])
    expect(_close(v["split_balance"], 1.0 / 3.0), "split_balance")
    expect(_close(v["split_separation"], 3.0 / (4.0 / 3.0)), "split_separation")
    # pairs: 2, 4, 2; mean 8/3; radius 2 -> w = 4/4 = 1; bins 2,2,3 -> cum at bin 2 = 2 >= 1.5
    expect(_close(v["mean_pairwise_dist"], 8.0 / 3.0), "mean_pairwise_dist")
    expect(_close(v["sigma"], 2.5), "sigma %r" % v["sigma"])
    # cos: (0,0) pairs 0, ((2,0),(4,0)) 1 -> 1/3
    expect(_close(v["mean_pairwise_cos"], 1.0 / 3.0), "mean_pairwise_cos")
    expect(_close(v["redundancy"], 1.0 / 3.0), "redundancy")
    expect(_close(v["redundant_members"], 2.0 / 3.0), "redundant_members")
    expect(_close(v["breadth"], 4.0), "breadth")
    # sigma / 2 = 1.25: no pair at or below -> 0
    expect(_close(v["local_density"], 0.0), "local_density %r" % v["local_density"])
    # entropy, 2 bins on [2, 4], w_e = 1: 2, 2 -> bin 0; 4 -> bin 1 (clamped); p = 2/3, 1/3
    H = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3)) / math.log(2)
    expect(_close(v["dist_entropy"], H), "dist_entropy")
    ent = np.mean(np.exp(-np.array([2.0, 4.0, 2.0]) ** 2 / (2 * 2.5 ** 2)))
    expect(_close(v["entanglement"], ent), "entanglement")
    # silhouette: A = {(0,0),(2,0)}, B = {(4,0)}: s1 = (4-2)/4, s2 = (2-2)/2 = 0, s3 = 0
    expect(_close(v["split_silhouette"], 0.5 / 3.0), "split_silhouette %r" % v["split_silhouette"])
    e = np.exp(-np.array([4.0, 0.0, 4.0]) / (2 * 6.25))
    expect(_close(v["potential_depth"], e.mean()), "potential_depth")
    expect(_close(v["curvature"], np.mean(e * (np.array([4.0, 0, 4]) / (2 * 6.25) - 1))), "curvature")
    D = math.hypot(8.0, 1.0)
    expect(_close(v["escape_probability"], math.exp(-D * D / (8 * 6.25))), "escape_probability")
    expect(v["nearest_cluster"] == 2 and _close(v["nearest_dist"], D), "nearest")
    expect(_close(v["db_ratio"], (4.0 / 3.0 + 1.0) / D), "db_ratio")
    # relevance: (4,0) is 2 from c and sqrt(36+1) from (10,1) -> all 3 home
    expect(_close(v["neighbour_relevance"], 1.0), "neighbour_relevance")
    b = np.array([math.hypot(10, 1), math.hypot(8, 1), math.hypot(6, 1)])
    rr = np.array([2.0, 0.0, 2.0])
    expect(_close(v["centroid_silhouette"], np.mean((b - rr) / np.maximum(b, rr))), "centroid_silhouette")
    # effective rank: centred (-2,0),(0,0),(2,0): one sv -> exp(0) = 1
    expect(_close(v["effective_rank"], 1.0), "effective_rank %r" % v["effective_rank"])
    w = rows[1]["values"]
    expect(w["skew"] is None and w["outlier_ratio"] == 0.0 and w["core_periphery_ratio"] == 1.0,
           "n = 2: s = 0 rules")
    expect(_close(w["sigma"], 2.0 * 1.0 * 3.5 / 4.0), "n = 2 sigma (clamped to the last bin)")
    expect(w["dist_entropy"] == 0.0, "n = 2 entropy 0 (max = min)")
    expect(w["split_silhouette"] == 0.0, "n = 2 split_silhouette 0 (both alone)")

    # --- collapsed, single member, zero vector
    Z = np.zeros((1, 3))
    S = np.array([[1.0, 2.0, 3.0]] * 4)
    T = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    rows = health([(0, Z), (1, S), (2, T)])
    z, s, t = (r["values"] for r in rows)
    expect(z["norm_cv"] is None and z["embedding_quality"] is None and z["cohesion"] is None
           and z["novelty"] is None and z["sigma"] is None and z["split_balance"] is None
           and z["effective_rank"] is None, "zero single member NULLs")
    expect(s["radius"] == 0.0 and s["sigma"] == 0.0 and s["local_density"] == 1.0 and s["dist_entropy"] == 0.0
           and s["core_periphery_ratio"] == 1.0 and all(s[k] is None for k in COLLAPSED_NULL), "collapsed rules")
    expect(np.array_equal(rows[1]["centroid"], S[0]), "identical members: c equals them bit for bit")
    expect(_close(s["cohesion"], 1.0) and _close(s["embedding_quality"], 1.0), "collapsed cohesion")
    expect(_close(t["embedding_quality"], math.sqrt(2.0) / 2.0), "embedding_quality over nonzero members")
    expect(_close(t["mean_pairwise_cos"], 0.0), "cos with zero member is 0")

    # --- identities and scikit-learn on random data
    rng = np.random.default_rng(1)
    for d in (3, 8, 40):
        clusters = []
        for k in range(6):
            n = int(rng.integers(2, 60))
            centre = rng.standard_normal(d) * 4
            clusters.append((k * 3 - 5, (centre + rng.standard_normal((n, d)) * rng.uniform(0.2, 2)).astype(np.float32)))
        rows = health(clusters, neighbours=2)
        X = np.concatenate([c[1] for c in clusters]).astype(np.float64)
        lab = np.concatenate([[c[0]] * len(c[1]) for c in clusters])
        sm = summary(rows)
        db = skm.davies_bouldin_score(X, lab)
        ch = skm.calinski_harabasz_score(X, lab)
        expect(abs(sm["davies_bouldin"] - db) <= 1e-9 * db, "DB %r vs sklearn %r" % (sm["davies_bouldin"], db))
        expect(abs(sm["calinski_harabasz"] - ch) <= 1e-9 * ch, "CH %r vs sklearn %r" % (sm["calinski_harabasz"], ch))
        for row, (label, M) in zip(rows, clusters):
            v = row["values"]
            M = M.astype(np.float64)
            n = len(M)
            # sum over pairs of squared distances = n * inertia
            pd = row["aux"]["pairs"]["pd"]
            expect(_close(float(np.sum(pd ** 2)), n * v["inertia"], 1e-10), "pairs identity")
            # mean_pairwise_cos by the O(nd) formula
            nr = row_norms(M)
            U = M[nr > 0] / nr[nr > 0][:, None]
            formula = (float(np.dot(U.sum(0), U.sum(0))) - len(U)) / (n * (n - 1))
            expect(_close(v["mean_pairwise_cos"], formula, 1e-10), "mean_pairwise_cos formula")
            # effective rank by a float64 Gram eigensolver
            Cc = M - M.mean(0)
            G = Cc @ Cc.T if n <= d else Cc.T @ Cc
            sv = np.sqrt(np.maximum(np.linalg.eigvalsh(G), 0))
            p = sv / sv.sum()
            p = p[p > 0]
            er = math.exp(-np.sum(p * np.log(p)))
            expect(_close(v["effective_rank"], er, 1e-6), "effective_rank %r vs Gram %r" % (v["effective_rank"], er))
            # sigma within half a bin of the lower median (the ceil(P/2)-th distance)
            med = float(np.sort(pd)[int(math.ceil(len(pd) / 2.0)) - 1])
            w = row["aux"]["pairs"]["sigma_w"]
            expect(abs(v["sigma"] - med) <= 0.5 * w * (1 + 1e-9), "sigma %r vs median %r (w %r)" % (v["sigma"], med, w))
            in_a = row["aux"]["two_means"]["in_a"]
            nl = len(set(in_a.tolist()))
            if 2 <= nl <= n - 1:
                sil = skm.silhouette_score(M, in_a.astype(int))
                expect(abs(v["split_silhouette"] - sil) <= 1e-9, "silhouette %r vs sklearn %r"
                       % (v["split_silhouette"], sil))
            # two-means against a plain re-implementation of Lloyd
            a, b = M[0].copy(), M[-1].copy()
            for _ in range(3):
                asg = np.linalg.norm(M - a, axis=1) <= np.linalg.norm(M - b, axis=1)
                if asg.any():
                    a = M[asg].mean(0)
                if (~asg).any():
                    b = M[~asg].mean(0)
            expect(np.array_equal(asg, in_a), "two-means assignment")
            # aggregate columns equal the health columns
            agg = stats_aggregate(M)
            for k in ("centroid_norm", "inertia", "cohesion", "mean_norm", "norm_cv", "embedding_quality"):
                expect(_close(agg[k], v[k], 1e-12), "aggregate %s" % k)
    # sklearn's CH = 1.0 when every cluster is collapsed, and a coinciding pair gives db 0
    A = np.array([[1.0, 1.0], [1.0, 1.0]])
    B = np.array([[3.0, 1.0], [3.0, 1.0], [3.0, 1.0]])
    rows = health([(1, A), (2, B)])
    X = np.concatenate([A, B])
    lab = [1, 1, 2, 2, 2]
    expect(summary(rows)["calinski_harabasz"] == skm.calinski_harabasz_score(X, lab) == 1.0, "CH collapsed")
    A = np.array([[1.0, 0.0], [-1.0, 0.0]])
    B = np.array([[0.0, 1.0], [0.0, -1.0]])
    Cc = np.array([[5.0, 5.0], [6.0, 5.0]])
    rows = health([(1, A), (2, B), (3, Cc)])
    X = np.concatenate([A, B, Cc])
    lab = [1, 1, 2, 2, 3, 3]
    db = skm.davies_bouldin_score(X, lab)
    expect(abs(summary(rows)["davies_bouldin"] - db) <= 1e-12, "DB with coinciding centroids %r vs %r"
           % (summary(rows)["davies_bouldin"], db))
    expect(rows[0]["values"]["nearest_cluster"] == 2 and rows[0]["values"]["nearest_dist"] == 0.0,
           "coinciding nearest")
    expect(rows[0]["values"]["neighbour_relevance"] == 1.0 and rows[0]["values"]["centroid_silhouette"] == 0.0,
           "coinciding relevance/silhouette")
    # ties in nearest_cluster: 2 is equidistant from 1 and 3 -> 1
    rows = health([(1, np.array([[0.0, 0.0]])), (2, np.array([[2.0, 0.0]])), (3, np.array([[4.0, 0.0]]))],
                  neighbours=1)
    expect(rows[1]["values"]["nearest_cluster"] == 1, "tie to the smaller label")
    for bad in (dict(outlier_z=-1), dict(dup_cos=0), dict(dup_cos=1.5), dict(neighbours=0), dict(sigma_bins=1),
                dict(entropy_bins=1), dict(rank_max_members=1), dict(outlier_z=float("nan"))):
        try:
            check_params(**dict(DEFAULTS, **bad))
            failures.append("accepted %r" % bad)
        except ValueError:
            pass
    for f in failures:
        print("FAIL", f)
    print("self-test: %d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    import sys
    sys.exit(_selftest())
