"""The psycopg2 adapters: text both ways, exact."""

import unittest

import numpy as np
import psycopg2

import clustervec
from adapter_cases import AdapterCases
from common import connect2, random_vector, rng_for, same_bits


class Psycopg2AdapterTest(AdapterCases, unittest.TestCase):
    driver = "psycopg2"

    def connect(self):
        return connect2()

    def rows(self, sql, params=(), binary=False):
        assert not binary, "psycopg2 has no binary results"
        with self.conn.cursor() as cur:
            cur.execute(sql, params or None)
            return cur.fetchall() if cur.description is not None else None

    def error_class(self):
        return psycopg2.Error

    def data_error_class(self):
        return psycopg2.DataError

    def test_literal_is_typed(self):
        with self.conn.cursor() as cur:
            literal = cur.mogrify("%s", (np.array([0.1, -0.0], np.float32),))
        self.assertEqual(literal, b"'[0.10000000149011612,-0.0]'::cvec")

    def test_binary_through_cvec_send(self):
        """The documented way to get the binary form through psycopg2."""
        v = random_vector(rng_for(self.id()), 1234)
        (data,), = self.rows("SELECT cvec_send(%s)", (v,))
        self.assertTrue(same_bits(clustervec.decode_binary(data), v))
