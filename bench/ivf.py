#!/usr/bin/env python3
"""cvivf beside pgvector's ivfflat and hnsw: build time, size, recall@10, QPS.

For each data set it loads one cvec table and, when pgvector is available, one
vector table from the same binary COPY stream (the two types share one binary
format), then for each index:

  - times CREATE INDEX, and its phases by polling pg_stat_progress_create_index
    from a second connection every 0.2 s;
  - reports pg_relation_size of the index and its ratio to rows x d x 4;
  - runs `SELECT id FROM t ORDER BY v <-> q LIMIT 10` for every query, once
    untimed (warm-up) and once timed, per setting (clustervec.probes,
    ivfflat.probes, hnsw.ef_search), single client, and reports recall@10
    against exact neighbours (accepting distance ties), QPS, p50 and p99.

Both sides build with maintenance_work_mem = 2GB and
max_parallel_maintenance_workers = 0 (cvivf builds in one process).
Connects through PGHOST/PGPORT/PGUSER/PGDATABASE; prints markdown.

Environment:
  CV_BENCH_SETS      comma list among synth128, synth1024, fashion, fashion_cos, fashion60k
                     (fashion60k: the train split of Debian's dataset-fashion-mnist)
                     (default: all of them)
  CV_BENCH_SCALE     row (and list) scale of the synthetic sets, e.g. 0.1
  CV_BENCH_QUERIES   queries of the synthetic sets (200); Fashion uses its 1,000
  CV_BENCH_PROBES    probes settings (1,5,10,20,40)
  CV_BENCH_EF        hnsw.ef_search settings (40,100)
  CV_BENCH_LISTS_SYNTH128 / _SYNTH1024 / _FASHION   lists, comma list
                     (1000 / 500 / 100; e.g. 1000,4096)
  CV_BENCH_HNSW_MAX_ROWS  skip hnsw above this many rows (300000)
  CV_BENCH_HNSW_TIMEOUT   cancel an hnsw build after this many seconds (900)
  CV_BENCH_MWM_RETRY maintenance_work_mem for a build refused with 2GB (6GB)
  CV_BENCH_PGVECTOR  0: clustervec only
  CV_BENCH_IVFFLAT / CV_BENCH_HNSW  0: skip that pgvector index
  CV_BENCH_PASSES    timed passes per setting (1); QPS and latencies pool them
  CV_BENCH_CLIENTS   client counts (1); above 1, every setting is also run by that many
                     concurrent sessions, each its own connection, QPS over all of them
  CV_BENCH_QUANT     cvivf storages to compare, comma list among none, sq8 (none,sq8);
                     each on its own copy of the table, so the planner sees one cvivf
  CV_BENCH_SEED      data and query seed (20261130)
  CV_BENCH_FASHION_DIR  the Fashion-MNIST t10k folder
  CV_BENCH_JSON      also write every measurement to this file
  CV_BENCH_KEEP      1: keep the tables at the end
"""
import gzip
import json
import os
import struct
import sys
import threading
import time

import numpy as np
import psycopg2

SEED = int(os.environ.get("CV_BENCH_SEED", 20261130))
SCALE = float(os.environ.get("CV_BENCH_SCALE", 1.0))
QUERIES = int(os.environ.get("CV_BENCH_QUERIES", 200))
PASSES = int(os.environ.get("CV_BENCH_PASSES", 1))
HNSW_MAX_ROWS = int(os.environ.get("CV_BENCH_HNSW_MAX_ROWS", 300_000))
MWM_RETRY = os.environ.get("CV_BENCH_MWM_RETRY", "6GB")
HNSW_TIMEOUT = int(os.environ.get("CV_BENCH_HNSW_TIMEOUT", 900))
K = 10


def env_list(name, default):
    return [int(x) for x in os.environ.get(name, default).split(",") if x.strip()]


PROBES = env_list("CV_BENCH_PROBES", "1,5,10,20,40")
CLIENTS = [c for c in env_list("CV_BENCH_CLIENTS", "1") if c > 1]
QUANT = [q.strip() for q in os.environ.get("CV_BENCH_QUANT", "none,sq8").split(",") if q.strip()]
EF_SEARCH = env_list("CV_BENCH_EF", "40,100")
ALL_SETS = ["synth128", "synth1024", "fashion", "fashion_cos", "fashion60k"]


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def out(text=""):
    print(text, flush=True)


# ---------------------------------------------------------------------------
# Data sets
# ---------------------------------------------------------------------------

class DataSet:
    """Vectors (float32, row i has id i), queries and exact top-k answers.

    truth_dist[q] is the exact k-th nearest distance of query q (float64);
    exact(q, ids) gives the exact distances of some ids, so a returned id
    counts as a hit when its distance is within the k-th (ties accepted).
    """

    def __init__(self, name, title, vectors, queries, metric, lists, note):
        self.name, self.title, self.vectors, self.queries = name, title, vectors, queries
        self.metric, self.lists, self.note = metric, lists, note
        self.truth_dist = None

    @property
    def rows(self):
        return self.vectors.shape[0]

    @property
    def dims(self):
        return self.vectors.shape[1]

    def exact(self, qi, ids):
        """Exact distances (float64) of rows ids from query qi."""
        x = self.vectors[np.asarray(ids, dtype=np.int64)].astype(np.float64)
        q = self.queries[qi].astype(np.float64)
        if self.metric == "l2":
            return np.sqrt(((x - q) ** 2).sum(1))
        return 1.0 - (x @ q) / (np.linalg.norm(x, axis=1) * np.linalg.norm(q))

    def recall(self, answers):
        """Mean recall@K of the answer id lists, ties at the K-th distance accepted."""
        hits = 0
        for qi, ids in enumerate(answers):
            if not ids:
                continue
            d = self.exact(qi, ids[:K])
            bound = self.truth_dist[qi]
            hits += int(np.sum(d <= bound + 1e-9 * max(1.0, abs(bound))))
        return hits / (K * len(answers))


def exact_kth_l2(vectors, queries, block=50):
    """The exact K-th smallest L2 distance of every query, in float64."""
    x = vectors.astype(np.float64)
    norms = (x * x).sum(1)
    kth = np.empty(len(queries))
    for s in range(0, len(queries), block):
        q = queries[s:s + block].astype(np.float64)
        # candidates by the expanded form, then exact distances on the best 100
        approx = norms[None, :] - 2.0 * (q @ x.T)
        cand = np.argpartition(approx, 100, axis=1)[:, :100]
        for j in range(len(q)):
            d = np.sqrt(((x[cand[j]] - q[j]) ** 2).sum(1))
            kth[s + j] = np.sort(d)[K - 1]
    return kth


def synthetic(name, rows, dims, centres, lists, rng):
    """Clustered data of low intrinsic dimension, like real embeddings.

    Gaussian clusters in a LATENT-d space (centres ~ N(0, 1), members =
    centre + N(0, 1)), mapped to dims by one random linear map, plus
    N(0, 0.1^2) noise in every dimension.  Isotropic clusters in the full
    dimension would be either perfectly separated or hopeless (distances
    concentrate), so recall would not depend on probes.
    """
    latent, spread, floor = 16, 1.0, 0.1
    c = rng.standard_normal((centres, latent), dtype=np.float32)
    w = rng.standard_normal((latent, dims), dtype=np.float32) / np.float32(np.sqrt(latent))

    def draw(n):
        z = c[rng.integers(0, centres, n)] + spread * rng.standard_normal((n, latent),
                                                                          dtype=np.float32)
        return z @ w + floor * rng.standard_normal((n, dims), dtype=np.float32)

    v = np.empty((rows, dims), dtype=np.float32)
    for s in range(0, rows, 100_000):
        v[s:min(rows, s + 100_000)] = draw(min(rows, s + 100_000) - s)
    ds = DataSet(name, f"synthetic {rows:,} x {dims}", v, draw(QUERIES), "l2", lists,
                 f"{centres:,} gaussian clusters (sd 1 around N(0,1) centres) in a {latent}-d "
                 f"latent space, mapped to {dims}-d by a random linear map, plus N(0, "
                 f"{floor}^2) noise per dimension; {QUERIES} fresh queries from the same "
                 f"distribution; exact top-10 in float64 numpy; seed {SEED}")
    t0 = time.perf_counter()
    ds.truth_dist = exact_kth_l2(v, ds.queries)
    log(f"{name}: exact neighbours in {time.perf_counter() - t0:.1f} s")
    return ds


def fashion_dir():
    env = os.environ.get("CV_BENCH_FASHION_DIR")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.path.join(here, "..", "..", "shared", "data", "fashion-mnist-t10k"),
                 "/work/shared/data/fashion-mnist-t10k"):
        if os.path.isdir(cand):
            return cand
    return "/work/shared/data/fashion-mnist-t10k"


def fashion(name, metric, lists):
    """Fashion-MNIST t10k: base ids 0..8999, queries 9000..9999 (the README's split)."""
    folder = fashion_dir()
    with gzip.open(os.path.join(folder, "t10k-images-idx3-ubyte.gz")) as f:
        raw = f.read()
    magic, n, r, c = struct.unpack(">IIII", raw[:16])
    assert magic == 0x803 and n == 10000, "unexpected IDX header"
    images = np.frombuffer(raw[16:], dtype=np.uint8).reshape(n, r * c).astype(np.float32)
    gt_file = "gt_l2_top100.tsv" if metric == "l2" else "gt_cosine_top100.tsv"
    truth = {}
    with open(os.path.join(folder, gt_file)) as f:
        for line in f:
            if line.startswith("#"):
                continue
            qid, ids, dists = line.rstrip("\n").split("\t")
            truth[int(qid)] = [int(x) for x in ids.split(",")[:K]]
    qids = sorted(truth)
    ds = DataSet(name, f"Fashion-MNIST t10k {'L2' if metric == 'l2' else 'cosine'}, "
                 f"9,000 x 784", images[:9000], images[qids], metric, lists,
                 f"real images (uint8 pixels as float4), base ids 0..8999, the 1,000 "
                 f"queries 9000..9999, exact top-10 from {gt_file}")
    # the K-th distance of the file's exact top K, recomputed in float64 here
    ds.truth_dist = np.array([ds.exact(i, truth[q]).max() for i, q in enumerate(qids)])
    return ds


def read_idx_images(path):
    with gzip.open(path) as f:
        raw = f.read()
    magic, n, r, c = struct.unpack(">IIII", raw[:16])
    assert magic == 0x803, "unexpected IDX header"
    return np.frombuffer(raw[16:], dtype=np.uint8).reshape(n, r * c).astype(np.float32)


def fashion60k(name, lists):
    """Fashion-MNIST train split (60,000 x 784, Debian's dataset-fashion-mnist), the
    first QUERIES test images as queries, exact top-10 computed here."""
    folder = os.environ.get("CV_BENCH_FASHION60K_DIR", "/usr/share/datasets/fashion-mnist")
    path = os.path.join(folder, "train-images-idx3-ubyte.gz")
    if not os.path.exists(path):
        raise SystemExit(f"{path} is missing: apt-get install dataset-fashion-mnist")
    base = read_idx_images(path)
    queries = read_idx_images(os.path.join(folder, "t10k-images-idx3-ubyte.gz"))[:QUERIES]
    ds = DataSet(name, "Fashion-MNIST train L2, 60,000 x 784", base, queries, "l2", lists,
                 f"real images (uint8 pixels as float4) of the train split, ids 0..59999; the "
                 f"first {len(queries)} test images as queries; exact top-10 in float64 numpy")
    t0 = time.perf_counter()
    ds.truth_dist = exact_kth_l2(base, queries)
    log(f"{name}: exact neighbours in {time.perf_counter() - t0:.1f} s")
    return ds


def make_set(name):
    rng = np.random.default_rng([SEED, ALL_SETS.index(name)])
    scaled = lambda n: max(1000, int(round(n * SCALE)))  # noqa: E731
    lists_scaled = lambda ls: [max(10, int(round(x * SCALE))) for x in ls]  # noqa: E731
    if name == "synth128":
        return synthetic(name, scaled(1_000_000), 128, 1000,
                         lists_scaled(env_list("CV_BENCH_LISTS_SYNTH128", "1000")), rng)
    if name == "synth1024":
        return synthetic(name, scaled(200_000), 1024, 1000,
                         lists_scaled(env_list("CV_BENCH_LISTS_SYNTH1024", "500")), rng)
    if name == "fashion":
        return fashion(name, "l2", env_list("CV_BENCH_LISTS_FASHION", "100"))
    if name == "fashion60k":
        return fashion60k(name, env_list("CV_BENCH_LISTS_FASHION60K", "240"))
    if name == "fashion_cos":
        return fashion(name, "cosine", env_list("CV_BENCH_LISTS_FASHION", "100"))
    raise SystemExit(f"unknown set {name!r}; choose among {', '.join(ALL_SETS)}")


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------

def copy_chunk(ids, vectors):
    """A COPY (FORMAT binary) stream of (bigint, vector) rows, built by numpy."""
    d = vectors.shape[1]
    rec = np.dtype([("nf", ">i2"), ("l1", ">i4"), ("id", ">i8"), ("l2", ">i4"),
                    ("dim", ">i2"), ("unused", ">i2"), ("v", ">f4", (d,))])
    a = np.empty(len(ids), dtype=rec)
    a["nf"], a["l1"], a["id"] = 2, 8, ids
    a["l2"], a["dim"], a["unused"] = 4 + 4 * d, d, 0
    a["v"] = vectors
    return (b"PGCOPY\n\xff\r\n\0" + struct.pack("!ii", 0, 0) + a.tobytes()
            + struct.pack("!h", -1))


class BytesReader:
    def __init__(self, data):
        self.data, self.pos = memoryview(data), 0

    def read(self, size=-1):
        if size < 0:
            size = len(self.data) - self.pos
        chunk = self.data[self.pos:self.pos + size]
        self.pos += len(chunk)
        return bytes(chunk)

    readline = read


def load(cur, table, typename, ds):
    cur.execute(f"DROP TABLE IF EXISTS {table}")
    cur.execute(f"CREATE TABLE {table} (id bigint, v {typename}({ds.dims}))")
    for s in range(0, ds.rows, 50_000):
        e = min(ds.rows, s + 50_000)
        cur.copy_expert(f"COPY {table} FROM STDIN (FORMAT binary)",
                        BytesReader(copy_chunk(np.arange(s, e), ds.vectors[s:e])))
    cur.execute(f"VACUUM ANALYZE {table}")


# ---------------------------------------------------------------------------
# Builds
# ---------------------------------------------------------------------------

class ProgressPoller(threading.Thread):
    """Polls pg_stat_progress_create_index for one backend from its own connection."""

    def __init__(self, pid, interval=0.2):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.stop = threading.Event()
        self.seen = []  # (seconds since start, phase), one per change
        self.tuples_done = 0
        self.start_time = None

    def run(self):
        conn = psycopg2.connect("")
        conn.autocommit = True
        cur = conn.cursor()
        last = None
        while not self.stop.is_set():
            cur.execute("SELECT phase, tuples_done FROM pg_stat_progress_create_index "
                        "WHERE pid = %s", (self.pid,))
            row = cur.fetchone()
            if row is not None:
                self.tuples_done = row[1]
                phase = row[0].replace("building index: ", "")
                if phase != last:
                    self.seen.append((time.perf_counter() - self.start_time, phase))
                    last = phase
            self.stop.wait(self.interval)
        conn.close()

    def phases(self, total):
        """[(phase, seconds)] in order; each lasts until the next was first seen."""
        result = []
        for i, (t, phase) in enumerate(self.seen):
            end = self.seen[i + 1][0] if i + 1 < len(self.seen) else total
            result.append((phase, end - t))
        return result


class CpuMeter:
    """CPU seconds of the server backend, of this client, and of everything else.

    Other agents may share the machine's CPUs; "other" (in cores, averaged
    over the interval) says how busy the rest of the machine was, and the
    backend's own CPU seconds are far less sensitive to that than wall time.
    """

    TICK = os.sysconf("SC_CLK_TCK")

    def __init__(self, pid):
        self.pid = pid

    def snap(self):
        with open("/proc/stat") as f:
            cpu = [int(x) for x in f.readline().split()[1:]]
        busy = sum(cpu[:3]) + sum(cpu[5:8])  # user nice system, irq softirq steal
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        backend = int(fields[11]) + int(fields[12])  # utime, stime
        t = os.times()
        return time.perf_counter(), busy / self.TICK, backend / self.TICK, t.user + t.system

    @staticmethod
    def diff(a, b):
        wall = b[0] - a[0]
        backend, client = b[2] - a[2], b[3] - a[3]
        other = max(0.0, (b[1] - a[1]) - backend - client)
        return dict(wall=wall, backend_cpu=backend, client_cpu=client,
                    other_cores=other / wall if wall > 0 else 0.0)


class BuildTimeout(Exception):
    pass


def build(cur, meter, sql, timeout_s=0):
    """Runs CREATE INDEX; returns (seconds, [(phase, seconds)], cpu dict).

    With timeout_s, a build still running then is cancelled (statement_timeout)
    and BuildTimeout says how far it got.
    """
    poller = ProgressPoller(meter.pid)
    poller.start_time = time.perf_counter()
    poller.start()
    before = meter.snap()
    t0 = time.perf_counter()
    try:
        cur.execute(f"SET statement_timeout = '{int(timeout_s)}s'")
        cur.execute(sql)
    except psycopg2.errors.QueryCanceled:
        raise BuildTimeout(f"stopped by statement_timeout after {time.perf_counter() - t0:.0f} s "
                           f"with {poller.tuples_done:,} tuples inserted")
    finally:
        total = time.perf_counter() - t0
        after = meter.snap()
        poller.stop.set()
        poller.join()
        cur.execute("RESET statement_timeout")
    return total, poller.phases(total), CpuMeter.diff(before, after)


# ---------------------------------------------------------------------------
# Queries
# ---------------------------------------------------------------------------

def literal(v):
    return "[" + ",".join(repr(x) for x in v.tolist()) + "]"


def run_queries(cur, meter, sql, queries):
    """One untimed pass, then PASSES timed passes; returns (ms list, answers, cpu)."""
    for q in queries:
        cur.execute(sql, (q,))
        cur.fetchall()
    times, answers = [], None
    before = meter.snap()
    for _ in range(PASSES):
        got = []
        for q in queries:
            t = time.perf_counter()
            cur.execute(sql, (q,))
            rows = cur.fetchall()
            times.append((time.perf_counter() - t) * 1000)
            got.append([r[0] for r in rows])
        answers = answers or got
    return times, answers, CpuMeter.diff(before, meter.snap())


def concurrent_qps(sets, sql, queries, clients):
    """QPS of clients sessions running the queries at once (each all of them, PASSES times)."""
    conns = [psycopg2.connect("") for _ in range(clients)]
    curs = [c.cursor() for c in conns]
    for c in curs:
        for st in sets + ["SET enable_seqscan = off"]:
            c.execute(st)
    start = threading.Barrier(clients + 1)

    def work(c, shift):
        start.wait()
        for i in range(PASSES * len(queries)):
            c.execute(sql, (queries[(i + shift) % len(queries)],))
            c.fetchall()
    threads = [threading.Thread(target=work, args=(c, i * 7)) for i, c in enumerate(curs)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    for c in conns:
        c.close()
    return clients * PASSES * len(queries) / wall


def plan_uses_index(cur, sql, q, index):
    cur.execute("EXPLAIN (COSTS OFF) " + sql, (q,))
    return any(index in r[0] for r in cur.fetchall())


def measure(cur, meter, ds, ix, label, sets):
    """Recall, QPS and latencies of one index at one setting (a list of SETs)."""
    sql = f"SELECT id FROM {ix['table']} ORDER BY v {ix['op']} %s::{ix['cast']} LIMIT {K}"
    queries = [literal(q) for q in ds.queries]
    for s in sets:
        cur.execute(s)
    cur.execute("RESET enable_seqscan")
    chosen = plan_uses_index(cur, sql, queries[0], ix["index"])
    if not chosen:
        log(f"  planner picks no index scan of {ix['index']} at {label}; forcing it")
    cur.execute("SET enable_seqscan = off")
    if not plan_uses_index(cur, sql, queries[0], ix["index"]):
        raise RuntimeError(f"{ix['index']} not used even with enable_seqscan = off")
    times, answers, cpu = run_queries(cur, meter, sql, queries)
    cur.execute("RESET enable_seqscan")
    rec = ds.recall(answers)
    qps = len(times) / (sum(times) / 1000)
    p50, p99 = np.percentile(times, 50), np.percentile(times, 99)
    cpu_ms = cpu["backend_cpu"] * 1000 / len(times)
    log(f"  {ix['index']} {label}: recall {rec:.3f}, {qps:.0f} QPS, p50 {p50:.2f} ms, "
        f"backend CPU {cpu_ms:.2f} ms/query, other load {cpu['other_cores']:.2f} cores")
    many = {c: concurrent_qps(sets, sql, queries, c) for c in CLIENTS}
    for c, q in many.items():
        log(f"  {ix['index']} {label}: {q:.0f} QPS with {c} clients")
    return dict(setting=label, recall=rec, qps=qps, p50=float(p50), p99=float(p99),
                cpu_ms=cpu_ms, other_cores=cpu["other_cores"], planner_chose_index=chosen,
                clients={str(c): q for c, q in many.items()})


# ---------------------------------------------------------------------------
# One data set
# ---------------------------------------------------------------------------

OPS = {"l2": ("<->", "cvec_l2_ops", "vector_l2_ops"),
       "cosine": ("<=>", "cvec_cosine_ops", "vector_cosine_ops")}


def index_size(cur, name):
    cur.execute("SELECT pg_relation_size(%s::regclass)", (name,))
    return cur.fetchone()[0]


def build_index(cur, meter, ds, ix):
    """Builds one index (ix: kind, params, table, index, create, cast, op, settings)."""
    log(f"{ds.name}: {ix['create']}")
    try:
        secs, phases, cpu = build(cur, meter, ix["create"], ix.get("timeout_s", 0))
    except psycopg2.errors.ProgramLimitExceeded as e:
        # pgvector's ivfflat k-means needs sample x lists floats of
        # maintenance_work_mem (3.4 GB at 4,096 lists): say so, retry with more
        message = str(e).strip().splitlines()[0]
        log(f"  refused: {message}; retrying with maintenance_work_mem = '{MWM_RETRY}'")
        cur.execute(f"SET maintenance_work_mem = '{MWM_RETRY}'")
        try:
            secs, phases, cpu = build(cur, meter, ix["create"], ix.get("timeout_s", 0))
        finally:
            cur.execute("SET maintenance_work_mem = '2GB'")
        ix["note"] = f"maintenance_work_mem {MWM_RETRY} (2GB: \"{message}\")"
    size = index_size(cur, ix["index"])
    log(f"  built in {secs:.1f} s (backend CPU {cpu['backend_cpu']:.1f} s, other load "
        f"{cpu['other_cores']:.2f} cores), {size / 2**20:.1f} MiB, phases {phases}")
    if ix["kind"].startswith("clustervec"):
        t0 = time.perf_counter()
        cur.execute(f"SELECT cvivf_verify('{ix['index']}')")
        log(f"  cvivf_verify passed in {time.perf_counter() - t0:.1f} s")
    return dict(kind=ix["kind"], params=ix["params"], note=ix.get("note"), build_s=secs, build_cpu=cpu["backend_cpu"],
                build_other=cpu["other_cores"], phases=phases, size=size,
                raw=ds.rows * ds.dims * 4, runs=[])


def bench_group(cur, meter, ds, group):
    """Builds the indexes of a group, then measures them setting by setting, in turn.

    Interleaving the sides spreads any load from other processes over both.
    """
    entries = []
    for ix in group:
        try:
            entries.append(build_index(cur, meter, ds, ix))
        except BuildTimeout as e:
            log(f"  {ix['index']}: {e}")
            return [], f"{ix['kind']} on {ds.rows:,} rows: build {e}"
    for i in range(max(len(ix["settings"]) for ix in group)):
        for ix, entry in zip(group, entries):
            if i < len(ix["settings"]):
                entry["runs"].append(measure(cur, meter, ds, ix, *ix["settings"][i]))
    for ix in group:
        cur.execute(f"DROP INDEX {ix['index']}")
    return entries, None


def bench_set(cur, meter, ds, pgvector):
    op, cv_ops, pv_ops = OPS[ds.metric]
    t0 = time.perf_counter()
    load(cur, "ivf_cvec", "cvec", ds)
    log(f"{ds.name}: loaded {ds.rows:,} x {ds.dims} into cvec in {time.perf_counter() - t0:.1f} s")
    if pgvector:
        load(cur, "ivf_vector", "vector", ds)
    entries = []
    probes = lambda guc, lists: [(f"probes {p}", [f"SET {guc} = {p}"])  # noqa: E731
                                 for p in PROBES if p <= lists]
    for q in QUANT:
        if q != "none":
            cur.execute(f"DROP TABLE IF EXISTS ivf_cvec_{q}")
            cur.execute(f"CREATE TABLE ivf_cvec_{q} AS SELECT * FROM ivf_cvec")
    for lists in ds.lists:
        group = []
        for q in QUANT:
            table = "ivf_cvec" if q == "none" else f"ivf_cvec_{q}"
            group.append(dict(
                kind="clustervec cvivf" + ("" if q == "none" else f" {q}"),
                params=f"lists = {lists}", table=table, index=f"{table}_idx", cast="cvec", op=op,
                create=f"CREATE INDEX {table}_idx ON {table} USING cvivf (v {cv_ops}) "
                       f"WITH (lists = {lists}, quantization = {q})",
                settings=probes("clustervec.probes", lists)))
        if pgvector and os.environ.get("CV_BENCH_IVFFLAT", "1") != "0":
            group.append(dict(
                kind="pgvector ivfflat", params=f"lists = {lists}", table="ivf_vector",
                index="ivf_vector_ivfflat", cast="vector", op=op,
                create=f"CREATE INDEX ivf_vector_ivfflat ON ivf_vector USING ivfflat "
                       f"(v {pv_ops}) WITH (lists = {lists})",
                settings=probes("ivfflat.probes", lists)))
        entries += bench_group(cur, meter, ds, group)[0]
    skipped_hnsw = None
    if pgvector and os.environ.get("CV_BENCH_HNSW", "1") != "0":
        if ds.rows > HNSW_MAX_ROWS:
            skipped_hnsw = (f"hnsw not built on {ds.rows:,} rows (over CV_BENCH_HNSW_MAX_ROWS = "
                            f"{HNSW_MAX_ROWS:,}: a single-process build would take too long)")
        else:
            got, skipped_hnsw = bench_group(cur, meter, ds, [dict(
                kind="pgvector hnsw", params="m = 16, ef_construction = 64", timeout_s=HNSW_TIMEOUT,
                table="ivf_vector", index="ivf_vector_hnsw", cast="vector", op=op,
                create=f"CREATE INDEX ivf_vector_hnsw ON ivf_vector USING hnsw (v {pv_ops}) "
                       f"WITH (m = 16, ef_construction = 64)",
                settings=[(f"ef_search {e}", [f"SET hnsw.ef_search = {e}"])
                          for e in EF_SEARCH])])
            entries += got
    if os.environ.get("CV_BENCH_KEEP", "0") != "1":
        cur.execute("DROP TABLE IF EXISTS ivf_cvec, ivf_vector")
        for q in QUANT:
            if q != "none":
                cur.execute(f"DROP TABLE IF EXISTS ivf_cvec_{q}")
    return dict(name=ds.name, title=ds.title, rows=ds.rows, dims=ds.dims, metric=ds.metric,
                note=ds.note, queries=len(ds.queries), entries=entries, skipped_hnsw=skipped_hnsw)


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------

def first_at(runs, target):
    for r in runs:
        if r["recall"] >= target:
            return r
    return None


def qps_at(runs, target, clients=None, pick=None):
    """QPS at a recall target, interpolated linearly in log(QPS) between settings."""
    if pick is None:
        pick = (lambda r: r["qps"]) if clients is None else (lambda r: r["clients"][str(clients)])
    pts = sorted((r["recall"], np.log(pick(r))) for r in runs)
    for (r0, q0), (r1, q1) in zip(pts, pts[1:]):
        if r0 <= target <= r1:
            return float(np.exp(q0 if r1 == r0 else q0 + (q1 - q0) * (target - r0) / (r1 - r0)))
    return None


def report_vs_hnsw(res):
    """QPS at recall 0.95 and 0.99 (interpolated) of every index, and against hnsw's."""
    hnsw = [e for e in res["entries"] if e["kind"] == "pgvector hnsw"]
    ref = hnsw[0] if hnsw else None
    targets = [(0.95, None), (0.99, None)] + [(0.95, c) for c in CLIENTS]
    head = " | ".join(f"QPS at {t}{'' if c is None else f', {c} clients'} | x hnsw"
                      for t, c in targets)
    out(f"| index | parameters | build s | size / raw floats | {head} | backend CPU ms/query "
        f"at 0.95 | hnsw's / this | build x faster than hnsw |")
    out("|---|---|---:|---:|" + "---:|---:|" * len(targets) + "---:|---:|---:|")
    cpu = lambda r: r["cpu_ms"]  # noqa: E731
    for e in res["entries"]:
        cells = []
        for target, clients in targets:
            q = qps_at(e["runs"], target, clients)
            r = qps_at(ref["runs"], target, clients) if ref else None
            cells.append(f"{q:.0f}" if q else "-")
            cells.append(f"{q / r:.2f}x" if q and r else "-")
        c = qps_at(e["runs"], 0.95, pick=cpu)
        rc = qps_at(ref["runs"], 0.95, pick=cpu) if ref else None
        cells.append(f"{c:.2f}" if c else "-")
        cells.append(f"{rc / c:.2f}x" if c and rc else "-")
        faster = f"{ref['build_s'] / e['build_s']:.1f}x" if ref else "-"
        out(f"| {e['kind']} | {e['params']} | {e['build_s']:.1f} | {e['size'] / e['raw']:.2f} | "
            f"{' | '.join(cells)} | {faster} |")
    out()


def report_set(res):
    out(f"### {res['title']} ({res['metric']}, `{'<->' if res['metric'] == 'l2' else '<=>'}`)\n")
    out(f"{res['note']}.\n")
    out("| index | parameters | build s | backend CPU s | other load (cores) | phases (s) "
        "| size MiB | size / raw floats |")
    out("|---|---|---:|---:|---:|---|---:|---:|")
    for e in res["entries"]:
        ph = ", ".join(f"{p} {s:.1f}" for p, s in e["phases"] if s >= 0.05) or "-"
        params = e["params"] + (f"; {e['note']}" if e.get("note") else "")
        out(f"| {e['kind']} | {params} | {e['build_s']:.1f} | {e['build_cpu']:.1f} | "
            f"{e['build_other']:.2f} | {ph} | {e['size'] / 2**20:.1f} | "
            f"{e['size'] / e['raw']:.2f} |")
    out()
    out("| index | parameters | setting | recall@10 | QPS | p50 ms | p99 ms "
        "| backend CPU ms/query | other load (cores) |")
    out("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for e in res["entries"]:
        for r in e["runs"]:
            flag = "" if r["planner_chose_index"] else " (forced)"
            out(f"| {e['kind']} | {e['params']} | {r['setting']}{flag} | {r['recall']:.3f} | "
                f"{r['qps']:.0f} | {r['p50']:.2f} | {r['p99']:.2f} | {r['cpu_ms']:.2f} | "
                f"{r['other_cores']:.2f} |")
    out()
    if res["skipped_hnsw"]:
        out(f"({res['skipped_hnsw']}.)\n")
    report_vs_hnsw(res)
    cv = [e for e in res["entries"] if e["kind"] == "clustervec cvivf"]
    pv = {e["params"]: e for e in res["entries"] if e["kind"] == "pgvector ivfflat"}
    pairs = [(c, pv[c["params"]]) for c in cv if c["params"] in pv]
    if not pairs:
        return
    out("| cvivf vs ivfflat | build time ratio, wall (CPU) | size ratio | QPS ratio at "
        "equal probes | first probes with recall >= 0.95, cvivf; ivfflat | QPS ratio there "
        "(CPU/query ratio) | QPS ratio at recall 0.90; 0.95 (interpolated) |")
    out("|---|---:|---:|---|---|---:|---|")
    for c, p in pairs:
        ratios = [a["qps"] / b["qps"] for a, b in zip(c["runs"], p["runs"])]
        a, b = first_at(c["runs"], 0.95), first_at(p["runs"], 0.95)
        if a and b:
            at = f"{a['setting']} ({a['recall']:.3f}); {b['setting']} ({b['recall']:.3f})"
            ratio = f"{a['qps'] / b['qps']:.2f}x ({b['cpu_ms'] / a['cpu_ms']:.2f}x)"
        else:
            at = f"{a['setting'] if a else 'none'}; {b['setting'] if b else 'none'}"
            ratio = "-"
        interp = []
        for target in (0.90, 0.95):
            qa, qb = qps_at(c["runs"], target), qps_at(p["runs"], target)
            interp.append(f"{qa / qb:.2f}x" if qa and qb else "-")
        out(f"| {c['params']} | {p['build_s'] / c['build_s']:.2f}x "
            f"({p['build_cpu'] / max(c['build_cpu'], 1e-9):.2f}x) | "
            f"{c['size'] / p['size']:.2f} | {min(ratios):.2f}x..{max(ratios):.2f}x | "
            f"{at} | {ratio} | {'; '.join(interp)} |")
    out()


def report_json(path):
    """Prints the tables of a CV_BENCH_JSON file again (python3 bench/ivf.py --report FILE)."""
    with open(path) as f:
        for res in json.load(f):
            report_set(res)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--report":
        return report_json(sys.argv[2])
    sets = [s.strip() for s in os.environ.get("CV_BENCH_SETS", ",".join(ALL_SETS)).split(",")
            if s.strip()]
    conn = psycopg2.connect("")
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION IF NOT EXISTS clustervec")
    cur.execute("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'")
    pgvector = cur.fetchone()[0] > 0 and os.environ.get("CV_BENCH_PGVECTOR", "1") != "0"
    pv_version = None
    if pgvector:
        cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
        cur.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        pv_version = cur.fetchone()[0]
    for s in ("SET maintenance_work_mem = '2GB'", "SET max_parallel_maintenance_workers = 0",
              "SET clustervec.iterative_scan = off"):
        cur.execute(s)
    if pgvector:
        cur.execute("SET ivfflat.iterative_scan = off")
        cur.execute("SET hnsw.iterative_scan = off")
    cur.execute("SELECT pg_backend_pid()")
    pid = cur.fetchone()[0]
    cur.execute("SELECT version(), current_setting('shared_buffers'), clustervec_simd()")
    version, shared_buffers, simd = cur.fetchone()

    out("## bench/ivf: cvivf vs pgvector ivfflat and hnsw\n")
    out(f"{version.split(',')[0]}; shared_buffers {shared_buffers}; clustervec SIMD {simd}; "
        f"pgvector {pv_version or 'not installed (its rows are skipped)'}.  Builds: "
        f"maintenance_work_mem = 2GB, max_parallel_maintenance_workers = 0 on both sides "
        f"(cvivf builds in one process).  Queries: one client, `SELECT id FROM t ORDER BY v "
        f"<-> q LIMIT 10` with a literal vector, one untimed pass then {PASSES} timed "
        f"pass(es) per setting; iterative scans off on both sides; \"(forced)\" marks a "
        f"setting where the planner chose a sequential scan and enable_seqscan = off made it "
        f"use the index.  {os.cpu_count()} CPUs; "
        f"load average at start {open('/proc/loadavg').read().split()[0]}.\n")
    results = []
    for name in sets:
        ds = make_set(name)
        load_before = open("/proc/loadavg").read().split()[0]
        t0 = time.perf_counter()
        res = bench_set(cur, CpuMeter(pid), ds, pgvector)
        log(f"{name}: done in {time.perf_counter() - t0:.0f} s")
        res["loadavg"] = (load_before, open("/proc/loadavg").read().split()[0])
        results.append(res)
        report_set(res)
        out(f"(load average {res['loadavg'][0]} before, {res['loadavg'][1]} after this set.)\n")
        if os.environ.get("CV_BENCH_JSON"):
            with open(os.environ["CV_BENCH_JSON"], "w") as f:
                json.dump(results, f, indent=1)
        del ds


if __name__ == "__main__":
    main()
