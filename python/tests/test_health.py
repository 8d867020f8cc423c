"""clustervec.cluster_health: the DataFrame equals the SQL function's rows."""

import math
import sys
import unittest

import numpy as np
import pandas as pd
import psycopg
import psycopg2

import clustervec
from clustervec.health import PARAMETERS
from common import PREFIX, connect2, connect3, demo_data, load_table, rng_for

TABLE = PREFIX + "health"
TEXT_TABLE = PREFIX + "health_text"
SCHEMA = "cvpy Schema"                 # needs quoting, like the table below
QUOTED_TABLE = "Mixed Items"
GUARD = PREFIX + "guard"


def direct(conn2, sql):
    """Rows and column names of a statement run as written, through psycopg2
    with no clustervec adapter."""
    with conn2.cursor() as cur:
        cur.execute(sql)
        return [d.name for d in cur.description], cur.fetchall()


def is_null(value):
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


class HealthTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        rng = rng_for("test_health")
        cls.conn3 = connect3()
        labels, vectors = demo_data(rng, rows=1500, clusters=12, dim=16)
        load_table(cls.conn3, TABLE, labels, vectors)
        names = np.array(["café", "Zeta", "alpha", "b,c", "\"q\"", "x"], dtype=object)
        load_table(cls.conn3, TEXT_TABLE, names[labels % 6], vectors, label_type="text")
        cls.conn3.execute('CREATE SCHEMA IF NOT EXISTS "%s"' % SCHEMA)
        cls.conn3.execute('CREATE TABLE IF NOT EXISTS "%s"."%s" AS SELECT * FROM %s WHERE cluster < 4'
                          % (SCHEMA, QUOTED_TABLE, TABLE))
        cls.conn3.execute("CREATE TABLE IF NOT EXISTS %s (x int)" % GUARD)
        cls.conn2 = connect2()

    @classmethod
    def tearDownClass(cls):
        cls.conn3.execute("DROP TABLE IF EXISTS %s, %s, %s" % (TABLE, TEXT_TABLE, GUARD))
        cls.conn3.execute('DROP SCHEMA IF EXISTS "%s" CASCADE' % SCHEMA)
        cls.conn3.close()
        cls.conn2.close()

    def assert_same(self, frame, sql):
        """frame (DataFrame or list of dicts) holds exactly the rows of sql."""
        names, rows = direct(self.conn2, sql)
        if isinstance(frame, list):
            self.assertEqual(len(frame), len(rows))
            got_names = list(frame[0]) if frame else names
            cell = lambda i, name: frame[i][name]          # noqa: E731
        else:
            self.assertEqual(len(frame), len(rows))
            got_names = list(frame.columns)
            cell = lambda i, name: frame[name].iloc[i]     # noqa: E731
        self.assertEqual(got_names, names)
        self.assertEqual(len(names), 41)                   # cluster, the 38, two text columns
        for i, row in enumerate(rows):
            for name, want in zip(names, row):
                got = cell(i, name)
                if want is None:
                    self.assertTrue(is_null(got), "row %d %s: %r, want NULL" % (i, name, got))
                else:
                    self.assertFalse(is_null(got), "row %d %s: NULL, want %r" % (i, name, want))
                    self.assertEqual(got, want, "row %d %s" % (i, name))
                    self.assertEqual(type(got) is str, type(want) is str, "row %d %s type" % (i, name))

    def test_frame_equals_sql_psycopg3(self):
        df = clustervec.cluster_health(self.conn3, TABLE, "cluster", "embedding")
        self.assertIsInstance(df, pd.DataFrame)
        self.assertEqual(df["n"].dtype, np.int64)
        self.assertEqual(df["cohesion"].dtype, np.float64)
        self.assertEqual(int(df["n"].sum()), 1500)
        self.assert_same(df, "SELECT * FROM cluster_health('%s', 'cluster', 'embedding') ORDER BY cluster" % TABLE)

    def test_frame_equals_sql_psycopg2(self):
        df = clustervec.cluster_health(self.conn2, TABLE, "cluster", "embedding")
        self.assert_same(df, "SELECT * FROM cluster_health('%s', 'cluster', 'embedding') ORDER BY cluster" % TABLE)

    def test_parameters(self):
        params = dict(outlier_z=1.5, dup_cos=0.5, neighbours=2, sigma_bins=64, entropy_bins=7,
                      rank_max_members=100, order_column="id", progress=False)
        self.assertEqual(set(params), set(PARAMETERS))
        sql = ("SELECT * FROM cluster_health('%s', 'cluster', 'embedding', order_column => 'id', "
               "outlier_z => 1.5, dup_cos => 0.5, neighbours => 2, sigma_bins => 64, entropy_bins => 7, "
               "rank_max_members => 100, progress => false) ORDER BY cluster" % TABLE)
        for conn in (self.conn3, self.conn2):
            df = clustervec.cluster_health(conn, TABLE, "cluster", "embedding", **params)
            self.assert_same(df, sql)
            # the parameters did something: effective_rank refused above 100 members
            self.assertTrue(df["effective_rank"].isna().any())
        with self.assertRaises(TypeError):
            clustervec.cluster_health(self.conn3, TABLE, "cluster", "embedding", neighbors=3)
        with self.assertRaises(psycopg.errors.InvalidParameterValue):
            clustervec.cluster_health(self.conn3, TABLE, "cluster", "embedding", dup_cos=2.0)

    def test_text_labels_and_cursor(self):
        sql = "SELECT * FROM cluster_health('%s', 'cluster', 'embedding') ORDER BY cluster" % TEXT_TABLE
        for conn in (self.conn3, self.conn2):
            with conn.cursor() as cur:                       # a cursor is accepted too
                df = clustervec.cluster_health(cur, TEXT_TABLE, "cluster", "embedding")
            self.assert_same(df, sql)
            self.assertIn("café", set(df["cluster_text"]))

    def test_quoted_names(self):
        sql = ("SELECT * FROM cluster_health('\"%s\".\"%s\"', 'cluster', 'embedding') ORDER BY cluster"
               % (SCHEMA, QUOTED_TABLE))
        for table in ('"%s"."%s"' % (SCHEMA, QUOTED_TABLE), (SCHEMA, QUOTED_TABLE)):
            df = clustervec.cluster_health(self.conn3, table, "cluster", "embedding")
            self.assertEqual(len(df), 4)
            self.assert_same(df, sql)

    def test_no_sql_injection(self):
        """Names travel as parameters: SQL in them is an error, never run."""
        for conn, errors in ((self.conn3, psycopg.Error), (self.conn2, psycopg2.Error)):
            with self.assertRaises(errors):
                clustervec.cluster_health(conn, "%s; DROP TABLE %s" % (TABLE, GUARD), "cluster", "embedding")
            with self.assertRaises(errors):
                clustervec.cluster_health(conn, TABLE, "cluster'); DROP TABLE %s; --" % GUARD, "embedding")
            with self.assertRaises(errors):
                clustervec.cluster_health(conn, PREFIX + "no_such_table", "cluster", "embedding")
        (present,), = direct(self.conn2, "SELECT to_regclass('%s') IS NOT NULL" % GUARD)[1]
        self.assertTrue(present)

    def test_list_of_dicts(self):
        rows = clustervec.cluster_health(self.conn3, TABLE, "cluster", "embedding", frame=False)
        self.assertIsInstance(rows, list)
        self.assertIsInstance(rows[0], dict)
        self.assert_same(rows, "SELECT * FROM cluster_health('%s', 'cluster', 'embedding') ORDER BY cluster"
                         % TABLE)

    def test_without_pandas(self):
        """With pandas not importable the default is a list of dicts, and
        frame=True raises ImportError."""
        saved = sys.modules.get("pandas")
        sys.modules["pandas"] = None            # import pandas -> ImportError
        try:
            rows = clustervec.cluster_health(self.conn2, TABLE, "cluster", "embedding")
            self.assertIsInstance(rows, list)
            self.assertEqual(len(rows), 12)
            with self.assertRaises(ImportError):
                clustervec.cluster_health(self.conn2, TABLE, "cluster", "embedding", frame=True)
        finally:
            sys.modules["pandas"] = saved

    def test_one_cluster_nulls(self):
        """One cluster: the neighbour columns are NULL, NaN / <NA> in the frame."""
        table = PREFIX + "health_one"
        rng = rng_for(self.id())
        labels, vectors = demo_data(rng, rows=30, clusters=1, dim=8)
        load_table(self.conn3, table, labels, vectors)
        try:
            df = clustervec.cluster_health(self.conn3, table, "cluster", "embedding")
            self.assertEqual(len(df), 1)
            self.assertTrue(pd.isna(df["nearest_cluster"].iloc[0]))
            self.assertEqual(str(df["nearest_cluster"].dtype), "Int64")
            self.assertTrue(math.isnan(df["centroid_silhouette"].iloc[0]))
            self.assert_same(df, "SELECT * FROM cluster_health('%s', 'cluster', 'embedding') ORDER BY cluster"
                             % table)
            self.conn3.execute("TRUNCATE %s" % table)
            empty = clustervec.cluster_health(self.conn3, table, "cluster", "embedding")
            self.assertEqual(len(empty), 0)
            self.assertEqual(len(empty.columns), 41)
        finally:
            self.conn3.execute("DROP TABLE IF EXISTS %s" % table)
