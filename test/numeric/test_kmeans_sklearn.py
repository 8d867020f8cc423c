#!/usr/bin/python3
"""k-means of src/math against scikit-learn and float64 numpy.

No PostgreSQL needed: the C code is loaded with ctypes from
test/math/libcvkmeans.so, which this script builds (make -C test/math
libcvkmeans.so).  Inputs are fresh random numbers on every run: the seed is
printed, and CV_TEST_SEED repeats a run.

Our seeding (k-means++) gives the initial centroids; then our Lloyd and
float64 references run the same number of iterations from them: for L2 a
numpy Lloyd with our documented empty-cluster refill (kmeans.h), and
scikit-learn's KMeans(init=seeds, n_init=1, algorithm="lloyd", tol=0)
whenever our run refilled nothing (scikit-learn relocates empty clusters
by another rule, so after a refill the trajectories legitimately part);
for spherical and inner-product k-means a numpy loop.  Centroids must agree
to 1e-4 relative (ours keep float4 centroids, the references float64) and
so must the inertia.

Every test_* function gets its own generator (seeded from the run seed and
its name), so a test can be rerun alone:
    /usr/bin/python3 test/numeric/test_kmeans_sklearn.py [test_name ...]
Output: "PASS name" / "FAIL name: reason" per test, then "N passed, N failed".
"""

import ctypes
import os
import random
import subprocess
import sys
import time
import traceback
import zlib

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs

SEED = int(os.environ.get("CV_TEST_SEED") or random.SystemRandom().randrange(2**32))
HERE = os.path.dirname(os.path.abspath(__file__))
MATH_TESTS = os.path.join(HERE, "..", "math")
LIBRARY = os.path.join(MATH_TESTS, "libcvkmeans.so")

L2, SPHERICAL, INNER_PRODUCT = 0, 1, 2
REL_TOL = 1e-4


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

class TestFailure(AssertionError):
    """A mismatch a test detected (as opposed to an unexpected exception)."""


def check(condition, message):
    if not condition:
        raise TestFailure(message)


class Params(ctypes.Structure):
    """CvKmeansParams of src/math/kmeans.h."""
    _fields_ = [("k", ctypes.c_int), ("iterations", ctypes.c_int),
                ("seed", ctypes.c_uint64), ("metric", ctypes.c_int),
                ("progress", ctypes.c_void_p), ("progress_arg", ctypes.c_void_p),
                ("allocator", ctypes.c_void_p)]


class Result(ctypes.Structure):
    """CvKmeansResult of src/math/kmeans.h."""
    _fields_ = [("n_centroids", ctypes.c_int), ("iterations_run", ctypes.c_int),
                ("refilled", ctypes.c_int), ("inertia", ctypes.c_double)]


def load_library():
    """Builds (if stale) and loads the ctypes library, with argument types."""
    subprocess.run(["make", "-s", "-C", MATH_TESTS, "libcvkmeans.so"], check=True,
                   stdout=subprocess.DEVNULL)
    lib = ctypes.CDLL(LIBRARY)
    ptr = ctypes.c_void_p
    lib.cv_kmeans_seed.argtypes = [ptr, ctypes.c_size_t, ctypes.c_int,
                                   ctypes.POINTER(Params), ptr, ctypes.POINTER(ctypes.c_int)]
    lib.cv_kmeans_lloyd.argtypes = [ptr, ctypes.c_size_t, ctypes.c_int,
                                    ctypes.POINTER(Params), ptr, ptr, ptr,
                                    ctypes.POINTER(Result)]
    lib.cv_nearest_create.argtypes = [ptr, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                      ptr, ctypes.POINTER(ctypes.c_void_p)]
    lib.cv_nearest_assign.argtypes = [ptr, ptr, ctypes.c_size_t, ptr, ptr]
    lib.cv_nearest_free.argtypes = [ptr]
    lib.cv_simd_use.argtypes = [ctypes.c_int]
    lib.cv_simd_use.restype = ctypes.c_bool
    lib.cv_simd_best.restype = ctypes.c_int
    return lib


LIB = None


def address(array):
    return array.ctypes.data_as(ctypes.c_void_p)


def seeds_of(x, k, metric, seed):
    """Our k-means++ seeds (float32 rows)."""
    params = Params(k, 0, seed, metric, None, None, None)
    out = np.full((k, x.shape[1]), np.nan, dtype=np.float32)
    count = ctypes.c_int(-1)
    status = LIB.cv_kmeans_seed(address(x), x.shape[0], x.shape[1], ctypes.byref(params),
                                address(out), ctypes.byref(count))
    check(status == 0, "cv_kmeans_seed status %d" % status)
    return out[:count.value].copy()


def lloyd(x, centroids, iterations, metric):
    """Our Lloyd from the given centroids: (centroids, result, inertia history)."""
    params = Params(centroids.shape[0], iterations, 0, metric, None, None, None)
    c = np.ascontiguousarray(centroids, dtype=np.float32).copy()
    history = np.full(iterations, np.nan)
    result = Result()
    status = LIB.cv_kmeans_lloyd(address(x), x.shape[0], x.shape[1], ctypes.byref(params),
                                 address(c), None, address(history), ctypes.byref(result))
    check(status == 0, "cv_kmeans_lloyd status %d" % status)
    return c, result, history[:result.iterations_run]


def nearest(x, centroids, metric):
    """cv_nearest_assign: (index, float64 distance)."""
    handle = ctypes.c_void_p()
    status = LIB.cv_nearest_create(address(centroids), centroids.shape[0], x.shape[1],
                                   metric, None, ctypes.byref(handle))
    check(status == 0, "cv_nearest_create status %d" % status)
    index = np.full(x.shape[0], -1, dtype=np.int32)
    dist = np.full(x.shape[0], np.nan)
    status = LIB.cv_nearest_assign(handle, address(x), x.shape[0], address(index), address(dist))
    LIB.cv_nearest_free(handle)
    check(status == 0, "cv_nearest_assign status %d" % status)
    return index, dist


def blobs(rng, n, d, centers, std):
    """Float32 Gaussian blobs."""
    x, _ = make_blobs(n_samples=n, n_features=d, centers=centers, cluster_std=std,
                      random_state=int(rng.integers(2**31)))
    return np.ascontiguousarray(x, dtype=np.float32)


def unit_rows(x):
    x = x.astype(np.float64)
    return np.ascontiguousarray(x / np.linalg.norm(x, axis=1, keepdims=True), dtype=np.float32)


def sq_distances(x, c):
    """float64 squared distances, by the expansion (fine for a reference argmin)."""
    return (x * x).sum(1)[:, None] - 2.0 * x @ c.T + (c * c).sum(1)[None, :]


def l2_inertia(x, c):
    x = x.astype(np.float64)
    c = c.astype(np.float64)
    return float(np.maximum(sq_distances(x, c), 0.0).min(axis=1).sum())


def max_rel_diff(a, b):
    """Largest difference over the scale of b (centroid by centroid)."""
    scale = np.abs(b).max(axis=1) + 1e-30
    return float((np.abs(a - b).max(axis=1) / scale).max())


def refill_empty(x, c, labels):
    """kmeans.h's rule: each empty cluster, in order, takes the farthest member
    (lowest index on ties) of the largest cluster (lowest index on ties) that
    has two members and one away from its centroid."""
    k = len(c)
    counts = np.bincount(labels, minlength=k)
    no_donor = set()
    for j in np.nonzero(counts == 0)[0]:
        while True:
            donors = [i for i in range(k) if counts[i] >= 2 and i not in no_donor]
            if not donors:
                return
            big = max(donors, key=lambda i: (counts[i], -i))
            members = np.nonzero(labels == big)[0]
            dist = ((x[members] - c[big]) ** 2).sum(axis=1)
            if dist.max() > 0:
                break
            no_donor.add(big)
        labels[members[np.argmax(dist)]] = j
        counts[big] -= 1
        counts[j] = 1


def reference_l2_kmeans(x, seeds, iterations):
    """Float64 Lloyd with kmeans.h's empty-cluster refill and early stop."""
    x = x.astype(np.float64)
    c = seeds.astype(np.float64)
    previous = None
    for _ in range(iterations):
        labels = np.argmin(sq_distances(x, c), axis=1)
        if previous is not None and np.array_equal(labels, previous):
            break
        refill_empty(x, c, labels)
        for j in range(c.shape[0]):
            members = x[labels == j]
            if len(members):
                c[j] = members.mean(axis=0)
        previous = labels
    return c


def reference_dot_kmeans(x, seeds, iterations, spherical):
    """Float64 Lloyd by largest inner product (kmeans.h's refill, measured in
    L2 as documented); spherical re-normalises the means."""
    x = x.astype(np.float64)
    c = seeds.astype(np.float64)
    previous = None
    for _ in range(iterations):
        labels = np.argmax(x @ c.T, axis=1)
        if previous is not None and np.array_equal(labels, previous):
            break
        refill_empty(x, c, labels)
        for j in range(c.shape[0]):
            members = x[labels == j]
            if len(members):
                mean = members.mean(axis=0)
                c[j] = mean / np.linalg.norm(mean) if spherical else mean
        previous = labels
    return c


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------

def check_close(ours, x, ref, who):
    """Centroids and inertia within REL_TOL of a float64 reference."""
    diff = max_rel_diff(ours, ref)
    check(diff <= REL_TOL, "centroids differ from %s by %.3g relative" % (who, diff))
    ours_inertia, ref_inertia = l2_inertia(x, ours), l2_inertia(x, ref)
    check(abs(ours_inertia - ref_inertia) <= REL_TOL * ref_inertia,
          "inertia %.10g vs %s %.10g" % (ours_inertia, who, ref_inertia))


def compare_with_sklearn(rng, n, d, centers, k, iterations):
    """Our L2 k-means vs the numpy reference and scikit-learn, same seeds."""
    x = blobs(rng, n, d, centers, 1.5)
    seeds = seeds_of(x, k, L2, int(rng.integers(2**63)))
    check(seeds.shape[0] == k, "got %d seeds" % seeds.shape[0])
    ours, result, history = lloyd(x, seeds, iterations, L2)
    check_close(ours, x, reference_l2_kmeans(x, seeds, iterations), "numpy")
    if result.refilled == 0:
        sk = KMeans(n_clusters=k, init=seeds.astype(np.float64), n_init=1,
                    max_iter=iterations, algorithm="lloyd", tol=0.0).fit(x.astype(np.float64))
        check_close(ours, x, sk.cluster_centers_, "scikit-learn")
    check(np.all(np.diff(history) <= 1e-6 * history[:-1]), "inertia rose: %s" % history)


def test_sklearn_small(rng):
    compare_with_sklearn(rng, 5000, 32, 40, 30, 25)


def test_sklearn_medium(rng):
    compare_with_sklearn(rng, 20000, 64, 150, 100, 15)


def test_sklearn_wide(rng):
    compare_with_sklearn(rng, 4000, 300, 30, 20, 10)


def test_spherical_vs_numpy(rng):
    x = unit_rows(blobs(rng, 6000, 48, 50, 2.0))
    seeds = seeds_of(x, 40, SPHERICAL, int(rng.integers(2**63)))
    ours, _, _ = lloyd(x, seeds, 12, SPHERICAL)
    ref = reference_dot_kmeans(x, seeds, 12, spherical=True)
    diff = max_rel_diff(ours, ref)
    check(diff <= REL_TOL, "centroids differ by %.3g relative" % diff)
    norms = np.linalg.norm(ours.astype(np.float64), axis=1)
    check(np.all(np.abs(norms - 1.0) <= 1e-6), "norms %s .. %s" % (norms.min(), norms.max()))


def test_inner_product_vs_numpy(rng):
    x = unit_rows(blobs(rng, 6000, 40, 50, 2.0))
    seeds = seeds_of(x, 30, INNER_PRODUCT, int(rng.integers(2**63)))
    ours, _, _ = lloyd(x, seeds, 10, INNER_PRODUCT)
    ref = reference_dot_kmeans(x, seeds, 10, spherical=False)
    diff = max_rel_diff(ours, ref)
    check(diff <= REL_TOL, "centroids differ by %.3g relative" % diff)


def test_nearest_vs_numpy(rng):
    """cv_nearest_assign vs a float64 numpy argmin, every SIMD level."""
    x = blobs(rng, 20000, 96, 300, 3.0)
    c = np.ascontiguousarray(x[rng.choice(len(x), 500, replace=False)])
    want = np.argmin(sq_distances(x.astype(np.float64), c.astype(np.float64)), axis=1)
    best = LIB.cv_simd_best()
    for level in range(best + 1):
        if not LIB.cv_simd_use(level):
            continue
        index, dist = nearest(x, c, L2)
        exact = ((x[np.arange(len(x))].astype(np.float64) - c[index].astype(np.float64)) ** 2).sum(1)
        check(np.allclose(dist, exact, rtol=1e-12, atol=0), "level %d: distances" % level)
        differ = np.nonzero(index != want)[0]
        # numpy's expansion rounds differently: only genuine near-ties may differ
        for i in differ:
            d_ours = ((x[i].astype(np.float64) - c[index[i]]) ** 2).sum()
            d_np = ((x[i].astype(np.float64) - c[want[i]]) ** 2).sum()
            check(d_ours <= d_np * (1 + 1e-9), "level %d point %d: %g vs %g" % (level, i, d_ours, d_np))
    LIB.cv_simd_use(best)


# ---------------------------------------------------------------------------
# Runner
# ---------------------------------------------------------------------------

def rng_for(name):
    return np.random.default_rng([SEED, zlib.crc32(name.encode())])


def main(argv):
    global LIB
    print("seed = %d (set CV_TEST_SEED=%d to repeat this run)" % (SEED, SEED))
    tests = [(name, fn) for name, fn in globals().items() if name.startswith("test_") and callable(fn)]
    if argv:
        tests = [(name, fn) for name, fn in tests if name in argv]
    try:
        LIB = load_library()
    except Exception as e:  # noqa: BLE001 - any setup error fails the run
        print("FAIL setup: %s" % str(e).strip())
        print("0 passed, 1 failed")
        return 1
    passed = failed = 0
    for name, fn in tests:
        start = time.monotonic()
        try:
            fn(rng_for(name))
            passed += 1
            print("PASS %s (%.1f s)" % (name, time.monotonic() - start))
        except TestFailure as e:
            failed += 1
            print("FAIL %s: %s" % (name, e))
        except Exception as e:  # noqa: BLE001 - report and go on to the next test
            failed += 1
            print("FAIL %s: %s: %s" % (name, type(e).__name__, str(e).strip()))
            traceback.print_exc(file=sys.stdout)
        sys.stdout.flush()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
