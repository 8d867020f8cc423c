"""clustervec.report and python3 -m clustervec.report: one valid,
self-contained HTML page, for a demo-like table, one cluster, degenerate
clusters and no cluster at all."""

import base64
import html.parser
import os
import re
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import clustervec
from common import PREFIX, PYTHON_DIR, connect3, demo_data, load_table, rng_for

DEMO = PREFIX + "report_demo"
ONE = PREFIX + "report_one"
DEGENERATE = PREFIX + "report_degenerate"
SINGLE = PREFIX + "report_single"
EMPTY = PREFIX + "report_empty"
SECTIONS = ("summary", "sizes", "cohesion-separation", "silhouette", "neighbours", "clusters")
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class _Checker(html.parser.HTMLParser):
    """Well-formedness: every non-void element closed in order; collects ids,
    images and text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.ids, self.images, self.text = [], [], [], [], []
        self.doctype = False

    def handle_decl(self, decl):
        self.doctype = self.doctype or decl.lower() == "doctype html"

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.append(attrs["id"])
        if tag == "img":
            self.images.append(attrs.get("src", ""))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append("</%s> closes %s" % (tag, self.stack[-1] if self.stack else "nothing"))
        else:
            self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def check_page(test, path):
    """Parse the page at path; fail on malformed HTML, external resources or
    images that are not embedded PNGs.  Returns the checker."""
    test.assertTrue(os.path.isfile(path), path)
    with open(path, encoding="utf-8") as f:
        page = f.read()
    checker = _Checker()
    checker.feed(page)
    checker.close()
    test.assertTrue(checker.doctype, "no <!DOCTYPE html>")
    test.assertEqual(checker.errors, [])
    test.assertEqual(checker.stack, [], "unclosed elements")
    test.assertIsNone(re.search(r'(src|href)="(https?:|//|file:)', page), "an external resource")
    for src in checker.images:
        test.assertTrue(src.startswith("data:image/png;base64,"), src[:40])
        test.assertTrue(base64.b64decode(src.split(",", 1)[1], validate=True).startswith(PNG_MAGIC))
    checker.page = page
    checker.alltext = " ".join(" ".join(checker.text).split())
    return checker


class ReportTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        rng = rng_for("test_report")
        cls.conn = connect3()
        labels, vectors = demo_data(rng, rows=3000, clusters=50, dim=32)
        load_table(cls.conn, DEMO, labels, vectors)
        labels, vectors = demo_data(rng, rows=40, clusters=1, dim=8)
        load_table(cls.conn, ONE, labels, vectors)
        # two clusters whose centroids are zero (cohesion NULL): three zero
        # vectors (collapsed) and two opposite ones
        vectors = np.array([[0, 0, 0], [0, 0, 0], [0, 0, 0], [1, 0, 0], [-1, 0, 0]], dtype=np.float32)
        load_table(cls.conn, DEGENERATE, np.array([7, 7, 7, 9, 9]), vectors)
        # one row: NULL nearly everywhere
        load_table(cls.conn, SINGLE, np.array([3]), np.array([[1, 2, 3]], dtype=np.float32))
        load_table(cls.conn, EMPTY, np.zeros(0, np.int64), np.zeros((0, 4), np.float32))
        cls.tmp = tempfile.TemporaryDirectory(prefix="cvpy-report-")

    @classmethod
    def tearDownClass(cls):
        cls.conn.execute("DROP TABLE IF EXISTS %s, %s, %s, %s, %s" % (DEMO, ONE, DEGENERATE, SINGLE, EMPTY))
        cls.conn.close()
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name + ".html")

    def health(self, table, **kw):
        return clustervec.cluster_health(self.conn, table, "cluster", "embedding", **kw)

    def test_demo(self):
        df = self.health(DEMO)
        out = self.path("demo")
        self.assertEqual(clustervec.report(df, out, title="Demo <report> & co"), out)
        page = check_page(self, out)
        for section in SECTIONS + ("tightest", "loosest", "overlapping"):
            self.assertIn(section, page.ids)
        self.assertEqual(len(page.images), 4)                   # sizes, scatter, silhouettes, graph
        self.assertTrue("<title>Demo &lt;report&gt; &amp; co</title>" in page.page)
        self.assertTrue("<dt>clusters</dt><dd>50</dd><dt>rows</dt><dd>3000</dd>" in page.page)
        self.assertFalse("NULL for every cluster" in page.alltext)
        # the tables name the extreme clusters
        tight = df.sort_values("cohesion", ascending=False, kind="stable")["cluster"].iloc[0]
        self.assertTrue(re.search(r'id="tightest">.*?<tbody><tr><td class="label">%d</td>' % tight, page.page, re.S),
                        "cluster %d not first among the tightest" % tight)

    def test_one_cluster(self):
        df = self.health(ONE)
        out = self.path("one")
        clustervec.report(df, out)
        page = check_page(self, out)
        for section in SECTIONS:
            self.assertIn(section, page.ids)
        self.assertEqual(len(page.images), 2)                   # sizes and split_silhouette
        self.assertIn("needs at least two clusters", page.alltext)
        self.assertIn("no neighbours", page.alltext)

    def test_degenerate_clusters(self):
        df = self.health(DEGENERATE)
        self.assertTrue(df["cohesion"].isna().all())
        out = self.path("degenerate")
        clustervec.report(df, out)
        page = check_page(self, out)
        self.assertIn("cohesion is NULL for every cluster", page.alltext)
        self.assertIn("neighbours", page.ids)

    def test_single_row(self):
        df = self.health(SINGLE)
        self.assertEqual(len(df), 1)
        out = self.path("single")
        clustervec.report(df, out)
        page = check_page(self, out)
        self.assertIn("both silhouettes are NULL", page.alltext)
        self.assertEqual(len(page.images), 1)                   # the sizes

    def test_empty(self):
        df = self.health(EMPTY)
        self.assertEqual(len(df), 0)
        for data, name in ((df, "empty"), ([], "empty-list"), (None, "none")):
            out = self.path(name)
            clustervec.report(data, out)
            page = check_page(self, out)
            self.assertIn("no clusters", page.alltext)
            self.assertEqual(page.images, [])

    def test_list_of_dicts(self):
        rows = self.health(DEMO, frame=False, neighbours=2)
        out = self.path("rows")
        clustervec.report(rows, out)
        page = check_page(self, out)
        self.assertEqual(len(page.images), 4)

    def test_report_stays_callable(self):
        import clustervec.report                               # noqa: F401  (the CLI module)
        out = self.path("callable")
        self.assertEqual(clustervec.report([], out), out)
        self.assertTrue(os.path.isfile(out))

    def run_cli(self, args, cwd, pythonpath):
        # PYTHONSAFEPATH: keep the working directory off sys.path, where a
        # built checkout's clustervec.so (the PostgreSQL module) would shadow
        # the package (see python/README.md)
        env = dict(os.environ, PYTHONPATH=pythonpath, PYTHONSAFEPATH="1")
        return subprocess.run([sys.executable, "-m", "clustervec.report"] + args, cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=300)

    def test_cli(self):
        """As scripts/demo.sh calls it (from the checkout's root with
        PYTHONPATH=python), and from elsewhere with an absolute PYTHONPATH."""
        root = os.path.dirname(PYTHON_DIR)
        for name, cwd, pythonpath in (("cli-root", root, "python"), ("cli-tmp", self.tmp.name, PYTHON_DIR)):
            out = self.path(name)
            done = self.run_cli(["--dsn", "", "--table", DEMO, "--label", "cluster", "--vector", "embedding",
                                 "--out", out, "--title", "CLI <title>", "--param", "neighbours=3"],
                                cwd, pythonpath)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(done.stdout.strip().splitlines()[-1], os.path.abspath(out))
            self.assertNotIn("Traceback", done.stderr)      # (a fresh matplotlib may log its font cache)
            page = check_page(self, out)
            self.assertTrue("<title>CLI &lt;title&gt;</title>" in page.page)
            self.assertEqual(len(page.images), 4)
        bad = self.run_cli(["--dsn", "", "--table", DEMO, "--label", "cluster", "--vector", "embedding",
                            "--out", self.path("bad"), "--param", "bogus=1"], self.tmp.name, PYTHON_DIR)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("bogus", bad.stderr)
        self.assertFalse(os.path.exists(self.path("bad")))
