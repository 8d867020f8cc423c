"""The history report: python3 -m clustervec.report --history over the
README's pg_cron snapshot table, filled here by the same INSERT three times
with the data changed between snapshots.  Its tables' values equal the
SQL's (exact, from the cells' data-value), its plots exist and are real
PNGs; a summary-only table, one snapshot and no snapshot render too."""

import html.parser
import os
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import clustervec
from common import PREFIX, PYTHON_DIR, connect3, demo_data, load_table, rng_for
from test_report import check_page

DATA = PREFIX + "history_items"
HISTORY = PREFIX + "history"
SUMMARY_ONLY = PREFIX + "history_summary"
ONE = PREFIX + "history_one"
EMPTY = PREFIX + "history_empty"

# The README's recipe (table and job), on this test's table.
CREATE = """CREATE TABLE {h} AS
SELECT now() AS taken_at,
	s.k AS summary_k, s.n AS summary_n, s.davies_bouldin AS summary_davies_bouldin,
	s.calinski_harabasz AS summary_calinski_harabasz, s.cohesion AS summary_cohesion,
	s.centroid_silhouette AS summary_centroid_silhouette, h.*
FROM cluster_health_summary('{t}', 'cluster', 'embedding') s,
	cluster_health('{t}', 'cluster', 'embedding') h
WITH NO DATA"""
SNAPSHOT = """INSERT INTO {h}
SELECT now(), s.k, s.n, s.davies_bouldin, s.calinski_harabasz, s.cohesion,
	s.centroid_silhouette, h.*
FROM cluster_health_summary('{t}', 'cluster', 'embedding', progress => false) s,
	cluster_health('{t}', 'cluster', 'embedding', progress => false) h"""


class _Cells(html.parser.HTMLParser):
    """Every <td> with a data-value: its data-* attributes."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.cells = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "td" and "data-value" in attrs:
            self.cells.append(attrs)


def cells_of(page):
    parser = _Cells()
    parser.feed(page)
    return parser.cells


def png_size(src):
    import base64
    data = base64.b64decode(src.split(",", 1)[1])
    return struct.unpack(">II", data[16:24])


class HistoryTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        rng = rng_for("test_history")
        cls.conn = conn = connect3()
        labels, vectors = demo_data(rng, rows=1200, clusters=10, dim=16)
        load_table(conn, DATA, labels, vectors)
        for table in (HISTORY, SUMMARY_ONLY, ONE, EMPTY):
            conn.execute("DROP TABLE IF EXISTS %s" % table)
        conn.execute(CREATE.format(h=HISTORY, t=DATA))
        conn.execute(CREATE.format(h=ONE, t=DATA))
        conn.execute(CREATE.format(h=EMPTY, t=DATA))
        conn.execute(SNAPSHOT.format(h=HISTORY, t=DATA))
        conn.execute(SNAPSHOT.format(h=ONE, t=DATA))
        # between snapshots: cluster 0 doubles, then every cluster gains shifted rows
        conn.execute("INSERT INTO %s SELECT id + 100000, cluster, embedding FROM %s WHERE cluster = 0"
                     % (DATA, DATA))
        conn.execute(SNAPSHOT.format(h=HISTORY, t=DATA))
        conn.execute("INSERT INTO %s SELECT id + 200000, cluster, embedding + "
                     "array_fill(0.2::real, ARRAY[16])::cvec FROM %s WHERE id %% 3 = 0" % (DATA, DATA))
        conn.execute(SNAPSHOT.format(h=HISTORY, t=DATA))
        conn.execute("CREATE TABLE %s AS SELECT DISTINCT taken_at, summary_k, summary_n, "
                     "summary_davies_bouldin, summary_calinski_harabasz, summary_cohesion, "
                     "summary_centroid_silhouette FROM %s" % (SUMMARY_ONLY, HISTORY))
        cls.tmp = tempfile.TemporaryDirectory(prefix="cvpy-history-")

    @classmethod
    def tearDownClass(cls):
        cls.conn.execute("DROP TABLE IF EXISTS %s, %s, %s, %s, %s"
                         % (DATA, HISTORY, SUMMARY_ONLY, ONE, EMPTY))
        cls.conn.close()
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name + ".html")

    def cli(self, table, out):
        env = dict(os.environ, PYTHONPATH=PYTHON_DIR, PYTHONSAFEPATH="1")
        done = subprocess.run([sys.executable, "-m", "clustervec.report", "--dsn", "", "--history", table,
                               "--out", out], cwd=self.tmp.name, env=env, capture_output=True, text=True,
                              timeout=300)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.strip().splitlines()[-1], os.path.abspath(out))
        return check_page(self, out)

    def sql(self, query):
        return self.conn.execute(query).fetchall()

    def test_history(self):
        page = self.cli(HISTORY, self.path("history"))
        for section in ("history-summary", "summary-trend", "size-trend", "spread-trend", "cluster-changes"):
            self.assertIn(section, page.ids)
        # three plots: the summary over time, sizes and mean distances of the largest clusters
        self.assertEqual(len(page.images), 3)
        for src in page.images:
            width, height = png_size(src)
            self.assertGreater(width, 300)
            self.assertGreater(height, 150)
        cells = cells_of(page.page)
        # the summary table: one row per snapshot, each value the SQL's, oldest first
        expected = self.sql("SELECT taken_at, summary_k, summary_n, summary_centroid_silhouette, "
                            "summary_davies_bouldin, summary_calinski_harabasz, summary_cohesion, "
                            "sum(inertia) FROM %s GROUP BY 1, 2, 3, 4, 5, 6, 7 ORDER BY taken_at" % HISTORY)
        self.assertEqual(len(expected), 3)
        columns = ("summary_k", "summary_n", "summary_centroid_silhouette", "summary_davies_bouldin",
                   "summary_calinski_harabasz", "summary_cohesion", "total_inertia")
        for k, column in enumerate(columns):
            shown = [float(c["data-value"]) for c in cells if c.get("data-column") == column
                     and "data-cluster" not in c]
            want = [float(row[k + 1]) for row in expected]
            if column == "total_inertia":
                np.testing.assert_allclose(shown, want, rtol=1e-12, err_msg=column)
            else:
                self.assertEqual(shown, want, column)
        # the snapshots differ: cluster 0 doubled between the first two
        n0 = self.sql("SELECT n FROM %s WHERE cluster = 0 ORDER BY taken_at" % HISTORY)
        self.assertEqual(n0[1][0], 2 * n0[0][0])
        # the largest clusters of the last snapshot, first and last values the SQL's
        largest = self.sql("SELECT cluster FROM %s WHERE taken_at = (SELECT max(taken_at) FROM %s) "
                           "ORDER BY n DESC, cluster::text LIMIT 8" % (HISTORY, HISTORY))
        shown_clusters = []
        for c in cells:
            if "data-cluster" in c and c["data-cluster"] not in shown_clusters:
                shown_clusters.append(c["data-cluster"])
        self.assertEqual(shown_clusters, [str(r[0]) for r in largest])
        for c in cells:
            if "data-cluster" not in c:
                continue
            agg = "min" if c["data-when"] == "first" else "max"
            (value,), = self.sql("SELECT %s FROM %s WHERE cluster = %s AND taken_at = "
                                 "(SELECT %s(taken_at) FROM %s)"
                                 % (c["data-column"], HISTORY, c["data-cluster"], agg, HISTORY))
            self.assertEqual(float(c["data-value"]), float(value), c)

    def test_api_and_rows(self):
        """health_history's frame and its list of dicts render the same tables."""
        df = clustervec.health_history(self.conn, HISTORY)
        (count,), = self.sql("SELECT count(*) FROM %s" % HISTORY)
        self.assertEqual(len(df), count)
        rows = clustervec.health_history(self.conn, HISTORY, frame=False)
        a, b = self.path("api-df"), self.path("api-rows")
        clustervec.history_report(df, a)
        clustervec.history_report(rows, b)
        self.assertEqual(cells_of(check_page(self, a).page), cells_of(check_page(self, b).page))

    def test_summary_only(self):
        page = self.cli(SUMMARY_ONLY, self.path("summary-only"))
        self.assertIn("summary-trend", page.ids)
        self.assertNotIn("size-trend", page.ids)
        self.assertEqual(len(page.images), 1)
        shown = [float(c["data-value"]) for c in cells_of(page.page)
                 if c.get("data-column") == "summary_davies_bouldin"]
        want = [float(r[0]) for r in self.sql("SELECT summary_davies_bouldin FROM %s ORDER BY taken_at"
                                              % SUMMARY_ONLY)]
        self.assertEqual(shown, want)

    def test_one_and_no_snapshot(self):
        page = self.cli(ONE, self.path("one"))
        self.assertIn("trends need two or more", page.alltext)
        self.assertEqual(page.images, [])
        self.assertIn("cluster-changes", page.ids)
        page = self.cli(EMPTY, self.path("empty"))
        self.assertIn("no snapshots", page.alltext)
        self.assertEqual(page.images, [])

    def test_cli_arguments(self):
        env = dict(os.environ, PYTHONPATH=PYTHON_DIR, PYTHONSAFEPATH="1")
        bad = subprocess.run([sys.executable, "-m", "clustervec.report", "--dsn", "", "--history", HISTORY,
                              "--table", DATA, "--out", self.path("bad")], cwd=self.tmp.name, env=env,
                             capture_output=True, text=True, timeout=300)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("--history takes no", bad.stderr)
        self.assertFalse(os.path.exists(self.path("bad")))
