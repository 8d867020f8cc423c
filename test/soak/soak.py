#!/usr/bin/env python3
"""soak.py: the clustervec soak driver (run by test/soak/soak.sh).

Against a running server with clustervec preloaded (the GPU worker up), it
loads a table of clustered vectors with a cvivf index, then for --seconds
runs clients of these kinds, while a killer SIGKILLs the GPU worker at
random intervals (each kill makes the postmaster reset every session):

  insert   batches of new rows, each commit recorded in a ledger
  delete   batches of rows the ledger knows committed
  search   ORDER BY v <-> q LIMIT k through the index (clustervec.gpu =
           auto; k rows, no row twice), sometimes as cvsearch; a quarter of
           them "verified": in one REPEATABLE READ snapshot, the index with
           every list probed against the exact sequential scan
  vacuum   VACUUM items
  reindex  REINDEX INDEX CONCURRENTLY (dropping what a reset left invalid)
  health   cluster_health / cluster_health_summary against count(*) in
           the same snapshot

Clients reconnect after a reset and carry on.  A COMMIT whose answer was
lost in a reset is "ambiguous": its rows may or may not be there.  At the
end: the ledger against the table (lost rows, deleted rows back, rows never
committed, wrong vectors), cvivf_verify, every row reachable through the
index, exact search on a sample of queries (CPU index path, GPU path,
cvsearch) against the sequential scan, and the server log (no crash but
the kills).  Prints a table; exits 1 on lost rows, wrong answers,
unexpected errors, hung clients or crashes, 0 otherwise.
"""

import argparse
import io
import os
import random
import re
import signal
import sys
import threading
import time
import traceback

import numpy as np
import psycopg2
import psycopg2.extensions

KINDS = ("insert", "delete", "search", "verified", "cvsearch", "vacuum", "reindex",
         "health", "connect")
# one client of each role in the first eight, then more writers and readers
ROLES = ("insert", "search", "delete", "vacuum", "insert", "search", "reindex", "health",
         "insert", "search", "delete", "insert", "search", "insert", "search", "search")
SINGLETONS = ("vacuum", "reindex", "health")
PROBES_ALL = 32768
INDEX = "items_v_idx"

# What a client sees when the postmaster resets every session.
RESET_SQLSTATES = ("57P02", "57P03")     # crash_shutdown, cannot_connect_now
RESET_MESSAGES = (
    "terminating connection because of crash of another server process",
    "server closed the connection unexpectedly",
    "the database system is in recovery mode",
    "the database system is not yet accepting connections",
    "the database system is starting up",
    "could not receive data from server",
    "could not send data to server",
    "no connection to the server",
    "connection already closed",
    "server conn crashed",
    "terminating connection due to unexpected postmaster exit",
)


# What a client may see from a concurrent REINDEX INDEX CONCURRENTLY: a
# cvsearch whose index (named by OID once parsed) was replaced and dropped
# while it waited for it.  Counted with the expected errors, and logged.
RACE_MESSAGES = (
    "was dropped while cvsearch waited for it",
)


def is_reindex_race(exc):
    """Whether an exception is a function meeting the index REINDEX CONCURRENTLY just dropped."""
    return getattr(exc, "pgcode", None) == "42704" and any(m in str(exc) for m in RACE_MESSAGES)


def is_reset_error(exc):
    """Whether an exception is one a crash-reset of the server causes."""
    if isinstance(exc, psycopg2.InterfaceError):
        return True
    code = getattr(exc, "pgcode", None)
    if code in RESET_SQLSTATES or (code or "").startswith("08"):
        return True
    # psycopg2 raises a lost connection as OperationalError or as plain
    # DatabaseError, depending on where in the protocol it happened
    if isinstance(exc, psycopg2.DatabaseError) and code is None:
        text = str(exc)
        return any(m in text for m in RESET_MESSAGES)
    return False


def now():
    return time.monotonic()


class Stats:
    """Counters per kind of transaction, and a log of what went wrong."""

    def __init__(self, log):
        self.lock = threading.Lock()
        self.ok = {k: 0 for k in KINDS}
        self.reset_errors = {k: 0 for k in KINDS}
        self.unexpected = {k: 0 for k in KINDS}
        self.wrong = {k: 0 for k in KINDS}
        self.log = log
        self.samples = {}

    def count(self, table, kind, n=1):
        with self.lock:
            table[kind] += n

    def event(self, text):
        """A line in the details log that places wrong answers among kills and maintenance."""
        with self.lock:
            self.log.write("%s event %s\n" % (time.strftime("%H:%M:%S"), text))
            self.log.flush()

    def note(self, kind, what, text):
        """Logs an unexpected error or a wrong answer: the first 20 of each kind in full, then one line each."""
        with self.lock:
            key = (kind, what)
            self.samples[key] = self.samples.get(key, 0) + 1
            if self.samples[key] > 20:
                text = text.split("\n")[0][:200]
            if self.samples[key] <= 2000:
                self.log.write("%s %s %s: %s\n" % (time.strftime("%H:%M:%S"), kind, what, text))
                self.log.flush()


class Ledger:
    """Which rows the clients saw committed, deleted, or could not tell."""

    def __init__(self, first_id):
        self.lock = threading.Lock()
        self.next_id = first_id
        self.committed = set()          # inserts seen committed (and the initial rows)
        self.ambiguous_insert = set()   # COMMIT sent, answer lost
        self.failed_insert = set()      # failed before COMMIT: never committed
        self.deleted = set()            # deletes seen committed
        self.ambiguous_delete = set()
        self.missing_at_delete = set()  # committed rows a DELETE did not find
        self.live = []                  # committed, not deleted, not being deleted
        self.live_pos = {}
        self.insert_txns = self.delete_txns = 0
        self.ambiguous_insert_txns = self.ambiguous_delete_txns = 0

    def _add_live(self, ids):
        for i in ids:
            self.live_pos[i] = len(self.live)
            self.live.append(i)

    def load(self, ids):
        with self.lock:
            self.committed.update(ids)
            self._add_live(ids)

    def allocate(self, n):
        with self.lock:
            first = self.next_id
            self.next_id += n
        return list(range(first, first + n))

    def live_count(self):
        with self.lock:
            return len(self.live)

    def inserted(self, ids, outcome):
        with self.lock:
            if outcome == "committed":
                self.committed.update(ids)
                self._add_live(ids)
                self.insert_txns += 1
            elif outcome == "ambiguous":
                self.ambiguous_insert.update(ids)
                self.ambiguous_insert_txns += 1
            else:
                self.failed_insert.update(ids)

    def claim(self, n, rng):
        """Takes up to n random live rows out of the pool for one deleter."""
        with self.lock:
            out = []
            while self.live and len(out) < n:
                j = rng.randrange(len(self.live))
                last = self.live.pop()
                if j < len(self.live):
                    chosen = self.live[j]
                    self.live[j] = last
                    self.live_pos[last] = j
                else:
                    chosen = last
                del self.live_pos[chosen]
                out.append(chosen)
            return out

    def deleted_rows(self, ids, outcome, found=None):
        with self.lock:
            if found is not None:
                self.missing_at_delete.update(set(ids) - set(found))
            if outcome == "committed":
                self.deleted.update(ids)
                self.delete_txns += 1
            elif outcome == "ambiguous":
                self.ambiguous_delete.update(ids)
                self.ambiguous_delete_txns += 1
            else:
                self._add_live(ids)


class Data:
    """The clustered vectors: row id -> its vector, the same in every run with one seed."""

    def __init__(self, seed, dims, centres, sigma):
        self.seed, self.dims, self.centres_n, self.sigma = seed, dims, centres, sigma
        self.centres = np.random.default_rng(seed).uniform(-10, 10, (centres, dims))

    def vector(self, row_id):
        noise = np.random.default_rng([self.seed, row_id]).normal(0, self.sigma, self.dims)
        return (self.centres[row_id % self.centres_n] + noise).astype(np.float32)

    def cluster(self, row_id):
        return row_id % self.centres_n

    def query(self, rng):
        """A query: near a centre mostly, anywhere in the box sometimes."""
        if rng.random() < 0.8:
            c = self.centres[rng.randrange(self.centres_n)]
            q = c + np.array([rng.gauss(0, self.sigma) for _ in range(self.dims)])
        else:
            q = np.array([rng.uniform(-12, 12) for _ in range(self.dims)])
        return text_of(q.astype(np.float32))


def text_of(v):
    """cvec text of a float32 vector; the shortest float64 form reads back to the same float4."""
    return "[" + ",".join(repr(float(x)) for x in v) + "]"


def connect(args, name):
    conn = psycopg2.connect(host=args.host, port=args.port, dbname=args.dbname,
                            user=args.user, connect_timeout=10,
                            application_name="soak " + name)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("SET clustervec.gpu = auto")
        cur.execute("SET statement_timeout = '%ds'" % args.statement_timeout)
    return conn


def repeated(rows):
    """ ', ids returned twice: [...]' when an answer repeats rows, else ''."""
    ids = [r[0] for r in rows]
    twice = sorted(set(i for i in ids if ids.count(i) > 1))
    return ", ids returned twice: %s" % twice if twice else ""


def same_answer(index_rows, exact_rows):
    """Equal distances, and equal ids but for the order among equal distances."""
    if [d for _, d in index_rows] != [d for _, d in exact_rows]:
        return False
    groups_a, groups_b = {}, {}
    for i, d in index_rows:
        groups_a.setdefault(d, set()).add(i)
    for i, d in exact_rows:
        groups_b.setdefault(d, set()).add(i)
    last = exact_rows[-1][1] if exact_rows else None
    # rows tied at the k-th distance may be any of the tied rows
    return all(groups_a[d] == groups_b[d] for d in groups_b if d != last)


class Client(threading.Thread):
    def __init__(self, number, role, ctx):
        super().__init__(name="%s-%d" % (role, number), daemon=True)
        self.role, self.ctx, self.args = role, ctx, ctx.args
        self.rng = random.Random(ctx.args.seed * 1000 + number)
        self.conn = None
        self.kind = role
        self.health_round = 0

    # -- the loop --------------------------------------------------------
    def run(self):
        step = getattr(self, "step_" + self.role)
        while not self.ctx.stop.is_set():
            try:
                if self.conn is None:
                    self.kind = "connect"
                    self.conn = connect(self.args, self.name)
                    self.ctx.stats.count(self.ctx.stats.ok, "connect")
                step()
            except Exception as exc:          # noqa: BLE001 - every error is classified
                self.failed(exc)
        self.close()

    def failed(self, exc):
        stats = self.ctx.stats
        if is_reindex_race(exc):
            stats.count(stats.reset_errors, self.kind)
            stats.note(self.kind, "reindex race", str(exc).strip())
            self.rollback()
            return
        if is_reset_error(exc):
            stats.count(stats.reset_errors, self.kind)
            self.close()
            self.ctx.stop.wait(self.rng.uniform(0.05, 0.3))
            return
        stats.count(stats.unexpected, self.kind)
        stats.note(self.kind, "error", "%s: %s" % (type(exc).__name__, str(exc).strip()))
        self.rollback()
        self.ctx.stop.wait(0.5)

    def rollback(self):
        try:
            if self.conn is not None and not self.conn.closed:
                self.conn.cursor().execute("ROLLBACK")
        except Exception:                     # noqa: BLE001
            self.close()

    def close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:                 # noqa: BLE001
                pass
        self.conn = None

    def pause(self, seconds):
        self.ctx.stop.wait(seconds)

    # -- writers ---------------------------------------------------------
    def step_insert(self):
        self.kind = "insert"
        if self.ctx.ledger.live_count() > self.args.rows * 1.3:
            self.pause(0.05)
            return
        self.pause(self.rng.uniform(0, 0.05))
        ids = self.ctx.ledger.allocate(self.rng.randint(1, 20))
        data = self.ctx.data
        vectors = [text_of(data.vector(i)) for i in ids]
        cur = self.conn.cursor()
        try:
            cur.execute("BEGIN")
            cur.execute("INSERT INTO items (id, c, v) SELECT * FROM unnest(%s::bigint[], %s::int[], %s::text[]::cvec[])",
                        (ids, [data.cluster(i) for i in ids], vectors))
        except Exception:
            self.ctx.ledger.inserted(ids, "failed")
            raise
        try:
            cur.execute("COMMIT")
        except Exception:
            self.ctx.ledger.inserted(ids, "ambiguous")
            raise
        self.ctx.ledger.inserted(ids, "committed")
        self.ctx.stats.count(self.ctx.stats.ok, "insert")

    def step_delete(self):
        self.kind = "delete"
        if self.ctx.ledger.live_count() < self.args.rows * 0.9:
            self.pause(0.05)
            return
        self.pause(self.rng.uniform(0, 0.05))
        ids = self.ctx.ledger.claim(self.rng.randint(1, 20), self.rng)
        if not ids:
            self.pause(0.05)
            return
        cur = self.conn.cursor()
        try:
            cur.execute("BEGIN")
            cur.execute("DELETE FROM items WHERE id = ANY(%s) RETURNING id", (ids,))
            found = [r[0] for r in cur.fetchall()]
        except Exception:
            self.ctx.ledger.deleted_rows(ids, "failed")
            raise
        if len(found) != len(ids):
            self.ctx.stats.note("delete", "missing", "committed rows not found by DELETE: %s"
                                % sorted(set(ids) - set(found)))
        try:
            cur.execute("COMMIT")
        except Exception:
            self.ctx.ledger.deleted_rows(ids, "ambiguous", found)
            raise
        self.ctx.ledger.deleted_rows(ids, "committed", found)
        self.ctx.stats.count(self.ctx.stats.ok, "delete")

    # -- readers ---------------------------------------------------------
    def step_search(self):
        r = self.rng.random()
        if r < 0.25:
            self.verified_search()
        elif r < 0.4:
            self.batch_search()
        else:
            self.plain_search()

    def plain_search(self):
        self.kind = "search"
        q = self.ctx.data.query(self.rng)
        k = self.rng.choice((1, 5, 10, 20, 50))
        cur = self.conn.cursor()
        cur.execute("SET clustervec.probes = %d" % self.rng.choice((1, 5, 10, 20)))
        cur.execute("SELECT id, v <-> %s::cvec FROM items ORDER BY v <-> %s::cvec LIMIT %s", (q, q, k))
        rows = cur.fetchall()
        # relaxed_order: rows from lists an iterative scan opened later may be
        # nearer than rows already returned, so only the count and the ids
        if len(rows) != k or len(set(i for i, _ in rows)) != len(rows):
            self.ctx.stats.count(self.ctx.stats.wrong, "search")
            self.ctx.stats.note("search", "wrong", "k=%d, got %d rows%s: %s" % (k, len(rows), repeated(rows), rows))
        self.ctx.stats.count(self.ctx.stats.ok, "search")

    def batch_search(self):
        self.kind = "cvsearch"
        qs = [self.ctx.data.query(self.rng) for _ in range(4)]
        k = self.rng.choice((1, 10, 50))
        cur = self.conn.cursor()
        cur.execute("SELECT query_no, tid::text, distance FROM cvsearch(%s, %s::text[]::cvec[], %s) ORDER BY 1, rank",
                    (INDEX, qs, k))
        rows = cur.fetchall()
        ok = len(rows) == 4 * k
        for qn in range(1, 5):
            tids = [t for n, t, _ in rows if n == qn]
            ok = ok and len(tids) == k and len(set(tids)) == k      # relaxed order, as a scan
        if not ok:
            self.ctx.stats.count(self.ctx.stats.wrong, "cvsearch")
            self.ctx.stats.note("cvsearch", "wrong", "k=%d: %s" % (k, rows))
        self.ctx.stats.count(self.ctx.stats.ok, "cvsearch")

    def verified_search(self):
        """The index probing every list answers as the sequential scan does, in one snapshot."""
        self.kind = "verified"
        q = self.ctx.data.query(self.rng)
        k = self.rng.choice((1, 10, 50))
        cur = self.conn.cursor()
        cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute("SET LOCAL enable_bitmapscan = off")
        cur.execute("SET LOCAL clustervec.probes = %d" % PROBES_ALL)
        cur.execute("SELECT id, v <-> %s::cvec FROM items ORDER BY v <-> %s::cvec LIMIT %s", (q, q, k))
        index_rows = cur.fetchall()
        cur.execute("SET LOCAL enable_seqscan = on")
        cur.execute("SET LOCAL enable_indexscan = off")
        cur.execute("SET LOCAL clustervec.gpu = off")
        cur.execute("SELECT id, v <-> %s::cvec AS d FROM items ORDER BY d, id LIMIT %s", (q, k))
        exact_rows = cur.fetchall()
        cpu_path = ""
        if not same_answer(index_rows, exact_rows):
            # which path was wrong: the same scan on the CPU, same snapshot
            cur.execute("SET LOCAL enable_seqscan = off")
            cur.execute("SET LOCAL enable_indexscan = on")
            cur.execute("SELECT id, v <-> %s::cvec FROM items ORDER BY v <-> %s::cvec LIMIT %s", (q, q, k))
            cpu_path = "right" if same_answer(cur.fetchall(), exact_rows) else "wrong too"
        cur.execute("COMMIT")
        if cpu_path:
            self.ctx.stats.count(self.ctx.stats.wrong, "verified")
            self.ctx.stats.note("verified", "wrong", "q=%s k=%d%s; the CPU index path in the same snapshot: %s"
                                "\n  index %s\n  exact %s"
                                % (q[:60], k, repeated(index_rows), cpu_path, index_rows, exact_rows))
        self.ctx.stats.count(self.ctx.stats.ok, "verified")

    def step_health(self):
        self.kind = "health"
        self.health_round += 1
        cur = self.conn.cursor()
        cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        if self.health_round % 2:
            cur.execute("SELECT count(*), coalesce(sum(n), 0) FROM cluster_health('items', 'c', 'v', progress => false)")
        else:
            cur.execute("SELECT k, n FROM cluster_health_summary('items', 'c', 'v', progress => false)")
        got = tuple(cur.fetchone())
        cur.execute("SELECT count(DISTINCT c), count(*) FROM items")
        want = tuple(cur.fetchone())
        cur.execute("COMMIT")
        if got != want:
            self.ctx.stats.count(self.ctx.stats.wrong, "health")
            self.ctx.stats.note("health", "wrong", "clusters, members %s; the table has %s" % (got, want))
        self.ctx.stats.count(self.ctx.stats.ok, "health")
        self.pause(self.rng.uniform(0.5, 2.0))

    # -- maintenance -----------------------------------------------------
    def step_vacuum(self):
        self.kind = "vacuum"
        self.pause(self.rng.uniform(1.0, 4.0))
        if self.ctx.stop.is_set():
            return
        # no ANALYZE: its snapshot makes REINDEX CONCURRENTLY wait for it while
        # it waits for REINDEX's lock, a deadlock of PostgreSQL's own
        # (autovacuum analyzes, and REINDEX does not wait for autovacuum)
        self.ctx.stats.event("vacuum starts")
        self.conn.cursor().execute("VACUUM items")
        self.ctx.stats.event("vacuum done")
        self.ctx.stats.count(self.ctx.stats.ok, "vacuum")

    def step_reindex(self):
        self.kind = "reindex"
        self.pause(self.rng.uniform(2.0, 6.0))
        if self.ctx.stop.is_set():
            return
        self.ctx.dropped_invalid += drop_invalid_indexes(self.conn)
        self.ctx.stats.event("reindex starts")
        self.conn.cursor().execute("REINDEX INDEX CONCURRENTLY " + INDEX)
        self.ctx.stats.event("reindex done")
        self.ctx.stats.count(self.ctx.stats.ok, "reindex")


def drop_invalid_indexes(conn):
    """Drops the invalid copies a reset in REINDEX CONCURRENTLY leaves (_ccnew, _ccold)."""
    cur = conn.cursor()
    cur.execute("""SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                   WHERE i.indrelid = 'items'::regclass AND NOT i.indisvalid""")
    names = [r[0] for r in cur.fetchall()]
    for name in names:
        cur.execute("DROP INDEX CONCURRENTLY IF EXISTS %s" % psycopg2.extensions.quote_ident(name, conn))
    return len(names)


def worker_pids(postmaster):
    """The GPU worker processes among the postmaster's children (what ps shows)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != postmaster:
                continue
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                cmd = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if b"clustervec gpu worker" in cmd:
            pids.append(int(entry))
    return pids


def find_workers(args):
    """The worker's pids from /proc, else from pg_stat_activity (where /proc hides the title)."""
    pids = worker_pids(args.postmaster_pid)
    if pids:
        return pids
    try:
        conn = connect(args, "killer")
        try:
            cur = conn.cursor()
            cur.execute("SELECT pid FROM pg_stat_activity WHERE backend_type = 'clustervec gpu worker'")
            return [r[0] for r in cur.fetchall()]
        finally:
            conn.close()
    except psycopg2.Error:
        return []


COUNTERS = ("gpu_requests", "searches", "health_runs", "index_builds", "cpu_fallbacks")


class Killer(threading.Thread):
    """SIGKILLs the GPU worker at random intervals and waits for the server to come back."""

    def __init__(self, ctx):
        super().__init__(name="killer", daemon=True)
        self.ctx, self.args = ctx, ctx.args
        self.rng = random.Random(ctx.args.seed * 7919 + 1)
        self.kills = self.survived = 0
        self.back_times, self.ready_times = [], []
        self.counters = {c: 0 for c in COUNTERS}
        self.failure = None

    def run(self):
        while not self.ctx.stop.wait(self.rng.uniform(self.args.kill_min, self.args.kill_max)):
            pids = find_workers(self.args)
            if len(pids) != 1:
                continue
            self.add_counters()
            try:
                os.kill(pids[0], signal.SIGKILL)
            except ProcessLookupError:
                continue
            self.kills += 1
            self.ctx.stats.event("kill %d: SIGKILL to the worker (pid %d)" % (self.kills, pids[0]))
            if not self.wait_back(pids[0]):
                self.failure = "the server or the worker did not come back within 120 s of kill %d" % self.kills
                self.ctx.stop.set()
                return

    def info(self):
        conn = connect(self.args, "killer")
        try:
            cur = conn.cursor()
            cur.execute("SELECT worker_state, backend, %s FROM clustervec_gpu_info()" % ", ".join(COUNTERS))
            return cur.fetchone()
        finally:
            conn.close()

    def add_counters(self):
        """The worker's counters start again at every reset: add them up before each kill."""
        try:
            row = self.info()
        except psycopg2.Error:
            return
        for name, value in zip(COUNTERS, row[2:]):
            self.counters[name] += value

    def wait_back(self, old_pid):
        """A new worker, a connection, and the worker ready: the reset is over."""
        start = now()
        back = None
        while now() - start < 120:
            pids = find_workers(self.args)
            if pids and old_pid not in pids:
                try:
                    state = self.info()[0]
                except psycopg2.Error:
                    state = None
                if state is not None and back is None:
                    back = now() - start
                if state in ("ready", "unavailable"):
                    self.back_times.append(back)
                    self.ready_times.append(now() - start)
                    self.survived += 1
                    return True
            time.sleep(0.05)
        return False


class Context:
    def __init__(self, args, log):
        self.args = args
        self.stop = threading.Event()
        self.stats = Stats(log)
        self.ledger = Ledger(args.rows + 1)
        self.data = Data(args.seed, args.dims, args.centres, args.sigma)
        self.dropped_invalid = 0


# -- setup --------------------------------------------------------------------

def wait_ready(args, seconds=120):
    """Waits for connections and a ready (or unavailable) worker; returns (state, backend)."""
    start = now()
    last = None
    while now() - start < seconds:
        try:
            conn = connect(args, "setup")
            cur = conn.cursor()
            cur.execute("CREATE EXTENSION IF NOT EXISTS clustervec")
            cur.execute("SELECT worker_state, backend FROM clustervec_gpu_info()")
            last = cur.fetchone()
            conn.close()
            if last[0] in ("ready", "unavailable"):
                return last
        except psycopg2.Error:
            pass
        time.sleep(0.2)
    raise SystemExit("the server or the GPU worker is not ready after %d s (last: %s)" % (seconds, last))


def setup(ctx):
    args, data = ctx.args, ctx.data
    conn = connect(args, "setup")
    cur = conn.cursor()
    cur.execute("SET client_min_messages = warning")
    cur.execute("DROP TABLE IF EXISTS items")
    cur.execute("CREATE EXTENSION IF NOT EXISTS clustervec")
    cur.execute("CREATE TABLE items (id bigint PRIMARY KEY, c int NOT NULL, v cvec(%d) NOT NULL)" % args.dims)
    buf = io.StringIO()
    ids = range(1, args.rows + 1)
    for i in ids:
        buf.write("%d\t%d\t%s\n" % (i, data.cluster(i), text_of(data.vector(i))))
    buf.seek(0)
    cur.copy_expert("COPY items (id, c, v) FROM STDIN", buf)
    cur.execute("CREATE INDEX %s ON items USING cvivf (v cvec_l2_ops) WITH (lists = %d, seed = 1)"
                % (INDEX, args.lists))
    cur.execute("VACUUM ANALYZE items")
    cur.execute("EXPLAIN (COSTS OFF) SELECT id FROM items ORDER BY v <-> %s::cvec LIMIT 10",
                (data.query(random.Random(1)),))
    plan = "\n".join(r[0] for r in cur.fetchall())
    conn.close()
    if "Index Scan using %s" % INDEX not in plan:
        raise SystemExit("the search does not use the index:\n" + plan)
    ctx.ledger.load(ids)


# -- final checks -------------------------------------------------------------

def check_ledger(ctx, conn):
    """The table against the ledger; returns a dict of counts."""
    led, data = ctx.ledger, ctx.data
    cur = conn.cursor()
    cur.execute("SET enable_indexscan = off")
    cur.execute("SET enable_bitmapscan = off")
    cur.execute("SELECT id, c, cvec_send(v) FROM items")
    present = {}
    for row_id, c, raw in cur.fetchall():
        present[row_id] = (c, bytes(raw))
    cur.execute("RESET enable_indexscan")
    cur.execute("RESET enable_bitmapscan")
    gone = led.deleted | led.ambiguous_delete
    must = led.committed - gone
    lost = sorted((must - set(present)) | led.missing_at_delete)
    back = sorted(led.deleted & set(present))
    phantom = sorted(set(present) - led.committed - led.ambiguous_insert)
    wrong = []
    for row_id, (c, raw) in present.items():
        v = np.frombuffer(raw[4:], dtype=">f4")
        if c != data.cluster(row_id) or not np.array_equal(v, data.vector(row_id)):
            wrong.append(row_id)
    amb_present = len(led.ambiguous_insert & set(present))
    for name, ids in (("lost", lost), ("deleted but present", back),
                      ("never committed but present", phantom), ("wrong vector", wrong)):
        if ids:
            ctx.stats.note("ledger", name, "%d rows, e.g. %s" % (len(ids), sorted(ids)[:20]))
    return {
        "rows": len(present), "lost": len(lost), "back": len(back), "phantom": len(phantom),
        "wrong_vector": len(wrong), "ambiguous_present": amb_present,
        "ambiguous_absent": len(led.ambiguous_insert) - amb_present,
    }


def exact_rows(cur, q, k):
    cur.execute("SET enable_indexscan = off")
    cur.execute("SET enable_bitmapscan = off")
    cur.execute("SET clustervec.gpu = off")
    cur.execute("SELECT id, v <-> %s::cvec AS d, ctid::text FROM items ORDER BY d, id LIMIT %s", (q, k))
    rows = cur.fetchall()
    cur.execute("RESET enable_indexscan")
    cur.execute("RESET enable_bitmapscan")
    return rows


def index_rows(cur, q, k, gpu):
    cur.execute("SET enable_seqscan = off")
    cur.execute("SET enable_bitmapscan = off")
    cur.execute("SET clustervec.probes = %d" % PROBES_ALL)
    cur.execute("SET clustervec.gpu = %s" % gpu)
    cur.execute("SELECT id, v <-> %s::cvec FROM items ORDER BY v <-> %s::cvec LIMIT %s", (q, q, k))
    rows = cur.fetchall()
    cur.execute("RESET enable_seqscan")
    cur.execute("RESET enable_bitmapscan")
    return rows


def check_exact(ctx, conn):
    """A sample of queries: the index probing every list (CPU path, GPU path, cvsearch) = exact."""
    cur = conn.cursor()
    rng = random.Random(ctx.args.seed + 99)
    cur.execute("SELECT clustervec_gpu_warm(%s)", (INDEX,))
    warm = cur.fetchone()[0]
    cur.execute("SET clustervec.probes = %d" % PROBES_ALL)
    cur.execute("SET enable_seqscan = off")
    cur.execute("EXPLAIN (COSTS OFF) SELECT id FROM items ORDER BY v <-> %s::cvec LIMIT 10",
                (ctx.data.query(rng),))
    plan = "\n".join(r[0] for r in cur.fetchall())
    cur.execute("RESET enable_seqscan")
    wrong = checked = 0
    if "Index Scan using %s" % INDEX not in plan:
        ctx.stats.note("final", "wrong", "the exact check's plan does not use the index:\n" + plan)
        wrong += 1
    queries = [ctx.data.query(rng) for _ in range(ctx.args.final_queries)]
    ks = [rng.choice((1, 10, 50)) for _ in queries]
    for q, k in zip(queries, ks):
        exact = exact_rows(cur, q, k)
        want = [(i, d) for i, d, _ in exact]
        for gpu in ("off", "auto"):
            got = index_rows(cur, q, k, gpu)
            checked += 1
            if not same_answer(got, want):
                wrong += 1
                ctx.stats.note("final", "wrong", "gpu=%s k=%d q=%s%s\n  index %s\n  exact %s"
                               % (gpu, k, q[:60], repeated(got), got, want))
        # cvsearch gives tids: compare (tid, distance) where distances are not tied
        cur.execute("SET clustervec.gpu = auto")
        cur.execute("SELECT tid::text, distance FROM cvsearch(%s, ARRAY[%s::cvec], %s, %s) ORDER BY rank",
                    (INDEX, q, k, PROBES_ALL))
        got = cur.fetchall()
        checked += 1
        if not same_answer(got, [(t, d) for _, d, t in exact]):
            wrong += 1
            ctx.stats.note("final", "wrong", "cvsearch k=%d q=%s\n  cvsearch %s\n  exact %s"
                           % (k, q[:60], got, [(t, d) for _, d, t in exact]))
    cur.execute("RESET clustervec.probes")
    return checked, wrong, warm


def check_reachable(conn):
    """Every row is returned, once, by a scan of the index probing every list."""
    cur = conn.cursor()
    cur.execute("SET enable_seqscan = off")
    cur.execute("SET enable_bitmapscan = off")
    cur.execute("SET enable_sort = off")
    cur.execute("SET clustervec.probes = %d" % PROBES_ALL)
    cur.execute("SET clustervec.gpu = off")
    cur.execute("SELECT v::text FROM items LIMIT 1")
    q = cur.fetchone()[0]
    scan = "SELECT id FROM items ORDER BY v <-> '%s' LIMIT 1000000000" % q
    cur.execute("SELECT (SELECT count(*) FROM (%s) s), (SELECT count(DISTINCT id) FROM (%s) s)" % (scan, scan))
    through_index, distinct = cur.fetchone()
    for s in ("enable_seqscan", "enable_bitmapscan", "enable_sort", "clustervec.probes", "clustervec.gpu"):
        cur.execute("RESET " + s)
    cur.execute("SELECT count(*) FROM items")
    heap = cur.fetchone()[0]
    return through_index, distinct, heap


def check_verify(conn):
    cur = conn.cursor()
    cur.execute("SELECT 1 FROM pg_proc WHERE proname = 'cvivf_verify'")
    if cur.fetchone() is None:
        return "absent"
    try:
        cur.execute("SELECT cvivf_verify(%s)", (INDEX,))
        return "pass"
    except psycopg2.Error as exc:
        return "FAIL: " + str(exc).strip()


WORKER_KILLED = re.compile(r'background worker "clustervec gpu worker" \(PID \d+\) was terminated by signal 9')


def check_server_log(path):
    """Kills and resets in the server log, and any other crash, PANIC or assertion failure."""
    kills = resets = 0
    others = []
    if not path or not os.path.exists(path):
        return None
    with open(path, errors="replace") as f:
        for line in f:
            if WORKER_KILLED.search(line):
                kills += 1
            elif "all server processes terminated; reinitializing" in line:
                resets += 1
            elif ("was terminated by signal" in line or "was terminated by exception" in line
                  or "PANIC:" in line or "TRAP:" in line
                  or ("clustervec gpu worker" in line and "exited with exit code" in line)):
                others.append(line.rstrip())
    return kills, resets, others


# -- report -------------------------------------------------------------------

def spread(values):
    if not values:
        return "-"
    values = sorted(values)
    return "%.2f / %.2f / %.2f s" % (values[0], values[len(values) // 2], values[-1])


def report(ctx, killer, elapsed, hung, final, backend):
    st, led, args = ctx.stats, ctx.ledger, ctx.args
    out = []
    w = out.append
    w("")
    w("clustervec soak: %.0f s of load (asked %d s), %d clients, %d rows x %d dims in %d clusters, "
      "%d lists, GPU library %s (worker backend %s)"
      % (elapsed, args.seconds, args.clients, args.rows, args.dims, args.centres, args.lists,
         args.gpu_library, backend))
    w("")
    w("| kind | transactions | errors from resets (and REINDEX swaps) | unexpected errors | wrong answers |")
    w("|---|---:|---:|---:|---:|")
    totals = [0, 0, 0, 0]
    for k in KINDS:
        row = (st.ok[k], st.reset_errors[k], st.unexpected[k], st.wrong[k])
        if not any(row):
            continue
        totals = [a + b for a, b in zip(totals, row)]
        w("| %s | %d | %d | %d | %d |" % ((k,) + row))
    w("| total | %d | %d | %d | %d |" % tuple(totals))
    w("")
    w("worker kills: %d, survived %d; after a kill, first connection / worker ready "
      "(min / median / max): %s, %s"
      % (killer.kills, killer.survived, spread(killer.back_times), spread(killer.ready_times)))
    w("served by the worker (summed over its lives): %s"
      % ", ".join("%s %d" % (c, killer.counters[c]) for c in COUNTERS))
    w("inserts: %d transactions seen committed, %d ambiguous (%d rows: %d present, %d absent), "
      "%d rows failed before COMMIT"
      % (led.insert_txns, led.ambiguous_insert_txns, len(led.ambiguous_insert),
         final["ambiguous_present"], final["ambiguous_absent"], len(led.failed_insert)))
    w("deletes: %d transactions seen committed (%d rows), %d ambiguous (%d rows)"
      % (led.delete_txns, len(led.deleted), led.ambiguous_delete_txns, len(led.ambiguous_delete)))
    w("invalid index copies left by resets and dropped: %d" % ctx.dropped_invalid_total)
    w("final table: %d rows; rows lost: %d; deleted rows back: %d; rows never committed present: %d; "
      "rows with a wrong vector: %d"
      % (final["rows"], final["lost"], final["back"], final["phantom"], final["wrong_vector"]))
    w("cvivf_verify: %s; through the index: %d rows (%d distinct) of %d"
      % (final["verify"], final["reach"][0], final["reach"][1], final["reach"][2]))
    w("exact search, %d queries: %d answers compared (CPU index path, GPU path after warm = %s, "
      "cvsearch), wrong answers: %d"
      % (args.final_queries, final["exact_checked"], final["warm"], final["exact_wrong"]))
    log = final["log"]
    if log is None:
        w("server log: not read")
    else:
        w("server log: %d worker SIGKILLs, %d resets, %d other crashes or failures"
          % (log[0], log[1], len(log[2])))
        for line in log[2][:10]:
            w("  " + line)
    wrong_total = sum(st.wrong.values()) + final["exact_wrong"]
    problems = []
    if final["lost"] or final["back"] or final["phantom"] or final["wrong_vector"]:
        problems.append("ledger")
    if wrong_total:
        problems.append("%d wrong answers" % wrong_total)
    if sum(st.unexpected.values()):
        problems.append("%d unexpected errors" % sum(st.unexpected.values()))
    if hung:
        problems.append("hung clients: " + ", ".join(hung))
    if killer.failure:
        problems.append(killer.failure)
    if killer.kills == 0:
        problems.append("no worker was killed (run longer or lower --kill-max)")
    if final["verify"] not in ("pass", "absent"):
        problems.append("cvivf_verify failed")
    if final["reach"][0] != final["reach"][2] or final["reach"][1] != final["reach"][2]:
        problems.append("the index does not reach every row")
    if log is not None and (log[2] or log[0] != killer.kills):
        problems.append("server log: %d other crashes, %d kills logged of %d" % (len(log[2]), log[0], killer.kills))
    w("")
    w("RESULT: %s" % ("PASS" if not problems else "FAIL (" + "; ".join(problems) + ")"))
    if problems:
        w("details: %s" % args.log)
    text = "\n".join(out)
    print(text, flush=True)
    if args.report:
        with open(args.report, "w") as f:
            f.write(text + "\n")
    return not problems


def progress(ctx, killer, start):
    st = ctx.stats
    done = sum(st.ok[k] for k in KINDS if k != "connect")
    print("[soak] %4.0f s: %d transactions, %d reset errors, %d unexpected, %d wrong, %d kills, %d live rows"
          % (now() - start, done, sum(st.reset_errors.values()), sum(st.unexpected.values()),
             sum(st.wrong.values()), killer.kills, ctx.ledger.live_count()), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--dbname", default="postgres")
    p.add_argument("--user", default=None)
    p.add_argument("--postmaster-pid", type=int, required=True)
    p.add_argument("--server-log", default=None)
    p.add_argument("--seconds", type=int, default=60)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--rows", type=int, default=20000)
    p.add_argument("--dims", type=int, default=64)
    p.add_argument("--centres", type=int, default=50)
    p.add_argument("--sigma", type=float, default=2.0)
    p.add_argument("--lists", type=int, default=0, help="0: rows / 400")
    p.add_argument("--kill-min", type=float, default=5.0)
    p.add_argument("--kill-max", type=float, default=15.0)
    p.add_argument("--final-queries", type=int, default=100)
    p.add_argument("--statement-timeout", type=int, default=300)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--gpu-library", default="?")
    p.add_argument("--log", default="soak-details.log")
    p.add_argument("--report", default=None)
    args = p.parse_args()
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 1 << 30)
    if args.lists <= 0:
        args.lists = max(1, args.rows // 400)

    log = open(args.log, "a")
    ctx = Context(args, log)
    print("[soak] seed %d (--seed %d repeats the data and the choices)" % (args.seed, args.seed), flush=True)
    state, backend = wait_ready(args)
    print("[soak] worker %s (%s); loading %d rows x %d dims, index of %d lists"
          % (state, backend, args.rows, args.dims, args.lists), flush=True)
    setup(ctx)

    roles = [ROLES[i % len(ROLES)] if i < len(ROLES) or ROLES[i % len(ROLES)] not in SINGLETONS
             else "search" for i in range(args.clients)]
    clients = [Client(i + 1, role, ctx) for i, role in enumerate(roles)]
    killer = Killer(ctx)
    start = now()
    for c in clients:
        c.start()
    killer.start()
    next_report = start + 10
    while not ctx.stop.is_set() and now() - start < args.seconds:
        time.sleep(0.2)
        if now() >= next_report:
            progress(ctx, killer, start)
            next_report += 10
    ctx.stop.set()
    elapsed = now() - start
    killer.join(150)
    for c in clients:
        c.join(max(1.0, start + args.seconds + args.statement_timeout + 60 - now()))
    hung = [c.name for c in clients if c.is_alive()]

    # the final checks, on a quiet server
    wait_ready(args)
    conn = connect(args, "final")
    ctx.dropped_invalid_total = ctx.dropped_invalid + drop_invalid_indexes(conn)
    killer.add_counters()
    final = check_ledger(ctx, conn)
    final["verify"] = check_verify(conn)
    final["reach"] = check_reachable(conn)
    final["exact_checked"], final["exact_wrong"], final["warm"] = check_exact(ctx, conn)
    conn.close()
    final["log"] = check_server_log(args.server_log)
    ok = report(ctx, killer, elapsed, hung, final, backend)
    log.close()
    sys.stdout.flush()
    os._exit(0 if ok else 1)                  # hung client threads must not keep us alive


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except Exception:                         # noqa: BLE001
        traceback.print_exc()
        sys.exit(2)
