"""The psycopg 3 adapters: binary parameters, binary and text results."""

import unittest

import numpy as np
import psycopg

import clustervec
from adapter_cases import AdapterCases
from common import PREFIX, connect3, first_difference, random_vector, rng_for, same_bits


class Psycopg3AdapterTest(AdapterCases, unittest.TestCase):
    driver = "psycopg"

    def connect(self):
        return connect3()

    def rows(self, sql, params=(), binary=False):
        with self.conn.cursor(binary=binary) as cur:
            cur.execute(sql, params or None)
            return cur.fetchall() if cur.description is not None else None

    def error_class(self):
        return psycopg.Error

    def data_error_class(self):
        return psycopg.DataError

    def result_formats(self):
        return (False, True)

    def test_parameters_are_binary(self):
        """%s picks the binary dumper, typed cvec by oid; %t the text one."""
        from psycopg.adapt import PyFormat, Transformer
        info = psycopg.types.TypeInfo.fetch(self.conn, "cvec")
        tx = Transformer(self.conn)
        for value in (np.ones(2, np.float32), clustervec.Cvec([1, 2])):
            auto = tx.get_dumper(value, PyFormat.AUTO)
            self.assertEqual((auto.format, auto.oid), (psycopg.pq.Format.BINARY, info.oid))
            text = tx.get_dumper(value, PyFormat.TEXT)
            self.assertEqual((text.format, text.oid), (psycopg.pq.Format.TEXT, info.oid))
        (back,), = self.rows("SELECT %t", (np.array([1, 2], np.float32),))
        self.assertTrue(same_bits(back, np.array([1, 2], np.float32)))

    def test_binary_copy(self):
        """COPY ... (FORMAT BINARY) both ways with set_types(["cvec"])."""
        rng = rng_for(self.id())
        vectors = [random_vector(rng, 300) for _ in range(20)] + [None]
        table = PREFIX + "copy3"
        self.rows("DROP TABLE IF EXISTS %s; CREATE TABLE %s (id int, v cvec)" % (table, table))
        try:
            with self.conn.cursor() as cur:
                with cur.copy("COPY %s FROM STDIN WITH (FORMAT BINARY)" % table) as copy:
                    copy.set_types(["int4", "cvec"])
                    for i, v in enumerate(vectors):
                        copy.write_row((i, v))
                with cur.copy("COPY (SELECT id, v FROM %s ORDER BY id) TO STDOUT WITH (FORMAT BINARY)"
                              % table) as copy:
                    copy.set_types(["int4", "cvec"])
                    back = list(copy.rows())
            self.assertEqual(len(back), len(vectors))
            for (i, b), v in zip(back, vectors):
                if v is None:
                    self.assertIsNone(b)
                else:
                    self.assertTrue(same_bits(v, b), first_difference(v, b))
        finally:
            self.rows("DROP TABLE IF EXISTS %s" % table)

    def test_register_on_cursor(self):
        """Registering on a cursor adapts that cursor only."""
        plain = connect3()
        try:
            cur = plain.cursor()
            from clustervec.psycopg import register_cvec
            register_cvec(cur)
            cur.execute("SELECT %s", (np.array([1, 2], np.float32),))
            self.assertTrue(same_bits(cur.fetchone()[0], np.array([1, 2], np.float32)))
            (text,), = plain.execute("SELECT '[1,2]'::cvec").fetchall()
            self.assertEqual(text, "[1,2]")                                  # other cursors: untouched
        finally:
            plain.close()
