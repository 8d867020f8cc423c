"""The adapter tests both drivers run (test_psycopg3.py, test_psycopg2.py):
each subclass says how to connect and how to run a statement."""

from decimal import Decimal, localcontext

import numpy as np

import clustervec
from clustervec import _codec
from common import PREFIX, first_difference, random_vector, rng_for, same_bits

# 1 to 16,000 dimensions: the edges, the SIMD widths, and three drawn per run
FIXED_DIMS = (1, 2, 3, 15, 16, 17, 100, 1000, 4096, 16000)


def _nearest_float32_is(decimal, value):
    """True when float32 ``value`` is the float32 nearest to ``decimal``
    (exact Decimal arithmetic; a tie goes to the even significand)."""
    x = np.float32(value)
    with localcontext() as ctx:
        ctx.prec = 400                  # every float32 and 9-digit decimal exactly
        here = Decimal(float(x))
        gap = abs(decimal - here)
        for toward in (np.float32(np.inf), np.float32(-np.inf)):
            with np.errstate(over="ignore"):
                other = np.nextafter(x, toward)
            if np.isinf(other):         # past FLT_MAX, rounding goes to 2**128
                other_value = Decimal(2) ** 128 * (1 if other > 0 else -1)
            else:
                other_value = Decimal(float(other))
            if other_value == here:     # +0 and -0
                continue
            other_gap = abs(decimal - other_value)
            if other_gap < gap or (other_gap == gap and int(x.view(np.uint32)) & 1):
                return False
    return True


def server_text_reads_back(text, expected):
    """True when every element of the server's text form is a decimal whose
    nearest float32 is the expected element (and the signs agree, for -0):
    an exact check that does not use the parser under test."""
    tokens = text.strip()[1:-1].split(",")
    if len(tokens) != expected.size:
        return False
    for token, value in zip(tokens, expected.tolist()):
        if not _nearest_float32_is(Decimal(token), value):
            return False
        if token.strip().startswith("-") != (np.signbit(np.float32(value))):
            return False
    return True


class AdapterCases:
    driver = None               # "psycopg" or "psycopg2"
    table = None

    # --- what a driver's test class provides -------------------------------

    def connect(self):
        raise NotImplementedError

    def rows(self, sql, params=(), binary=False):
        raise NotImplementedError

    def error_class(self):
        raise NotImplementedError

    def data_error_class(self):
        raise NotImplementedError

    # --- fixtures ----------------------------------------------------------

    def setUp(self):
        self.conn = self.connect()
        self.assertEqual(clustervec.register(self.conn), self.driver)
        self.table = PREFIX + "adapt_" + self.driver

    def tearDown(self):
        try:
            self.rows("DROP TABLE IF EXISTS %s" % self.table)
        finally:
            self.conn.close()

    def result_formats(self):
        return (False,)

    def dims(self):
        rng = rng_for(self.id() + "/dims")
        return FIXED_DIMS + tuple(int(d) for d in rng.integers(1, 16001, size=3))

    # --- tests ---------------------------------------------------------------

    def test_round_trip_exact(self):
        """Insert through a parameter, read back (text and, where the driver
        can, binary results): bit for bit; the server received exactly these
        floats (cvec_send), and its text form reads back to them."""
        rng = rng_for(self.id())
        self.rows("CREATE TABLE %s (id int, v cvec)" % self.table)
        vectors = {}
        for k, dim in enumerate(self.dims()):
            vectors[k] = random_vector(rng, dim)
            self.rows("INSERT INTO %s (id, v) VALUES (%%s, %%s)" % self.table, (k, vectors[k]))
        for binary in self.result_formats():
            for k, v_out, sent, text in self.rows(
                    "SELECT id, v, cvec_send(v), v::text FROM %s ORDER BY id" % self.table, binary=binary):
                v = vectors[k]
                what = "dim %d, %s results" % (v.size, "binary" if binary else "text")
                self.assertTrue(same_bits(v, v_out), "%s: %s" % (what, first_difference(v, v_out)))
                self.assertEqual(bytes(sent), _codec.encode_binary(v), what + ": the server holds other floats")
                self.assertTrue(same_bits(v, _codec.decode_text(text)), what + ": server text parsed back")
                self.assertTrue(server_text_reads_back(text, v), what + ": server text is another float4")

    def test_parameter_echo(self):
        """SELECT %s: the parameter typed cvec and returned as is."""
        rng = rng_for(self.id())
        for dim in (1, 5, 16000):
            v = random_vector(rng, dim)
            for binary in self.result_formats():
                (back, dims), = self.rows("SELECT %s, vector_dims(%s)", (v, v), binary=binary)
                self.assertTrue(same_bits(v, back), first_difference(v, back))
                self.assertEqual(dims, dim)
        (back,), = self.rows("SELECT %s", (clustervec.Cvec([1.5, -2]),))
        self.assertTrue(same_bits(back, np.array([1.5, -2], np.float32)))
        (dist,), = self.rows("SELECT %s <-> %s", (np.array([0, 0], np.float64), clustervec.Cvec([3.0, 4.0])))
        self.assertEqual(dist, 5.0)

    def test_null(self):
        self.rows("CREATE TABLE %s (id int, v cvec(3))" % self.table)
        self.rows("INSERT INTO %s VALUES (1, %%s), (2, %%s)" % self.table, (None, np.ones(3, np.float32)))
        for binary in self.result_formats():
            got = self.rows("SELECT id, v FROM %s ORDER BY id" % self.table, binary=binary)
            self.assertIsNone(got[0][1])
            self.assertTrue(same_bits(got[1][1], np.ones(3, np.float32)))
            (value,), = self.rows("SELECT NULL::cvec", binary=binary)
            self.assertIsNone(value)
            (array,), = self.rows("""SELECT '{"[1,2]",NULL}'::cvec[]""", binary=binary)
            self.assertEqual(len(array), 2)
            self.assertTrue(same_bits(array[0], np.array([1, 2], np.float32)))
            self.assertIsNone(array[1])

    def test_arrays(self):
        """A list of arrays goes as cvec[] and comes back as a list of arrays."""
        rng = rng_for(self.id())
        vectors = [random_vector(rng, 7) for _ in range(4)]
        for binary in self.result_formats():
            (back, kind), = self.rows("SELECT %s::cvec[], pg_typeof(%s)::text", (vectors, vectors), binary=binary)
            self.assertEqual(kind, "cvec[]")
            self.assertEqual(len(back), 4)
            for v, b in zip(vectors, back):
                self.assertTrue(same_bits(v, b), first_difference(v, b))

    def assert_sqlstate(self, sqlstate, sql, params):
        with self.assertRaises(self.error_class()) as caught:
            self.rows(sql, params)
        self.assertEqual(caught.exception.diag.sqlstate, sqlstate, str(caught.exception))

    def test_dimension_errors(self):
        """Dimension mismatches and refused values are the driver's exceptions
        with the server's SQLSTATE."""
        self.rows("CREATE TABLE %s (v cvec(4))" % self.table)
        three, four = np.ones(3, np.float32), np.ones(4, np.float32)
        self.assert_sqlstate("22000", "INSERT INTO %s VALUES (%%s)" % self.table, (three,))
        self.rows("INSERT INTO %s VALUES (%%s)" % self.table, (four,))          # still usable
        self.assert_sqlstate("22000", "SELECT %s <-> %s", (three, four))
        self.assert_sqlstate("54000", "SELECT %s", (np.zeros(16001, np.float32),))
        self.assert_sqlstate("22000", "SELECT %s", (np.array([1.0, np.inf]),))
        self.assert_sqlstate("22000", "SELECT %s", (np.array([1e39]),))        # float4 overflow -> inf
        with self.assertRaises(self.data_error_class()):
            self.rows("SELECT %s", (np.zeros(40000, np.float32),))             # beyond the int16 header
        with self.assertRaises(self.data_error_class()):
            self.rows("SELECT %s", (np.zeros((2, 2), np.float32),))
        (count,), = self.rows("SELECT count(*) FROM %s" % self.table)
        self.assertEqual(count, 1)

    def test_text_midpoint_matches_server(self):
        """A decimal a hair above a float32 midpoint: the server's strtof and
        our text parser agree (the double-rounding repair)."""
        above = Decimal(1) + Decimal(2) ** -24 + Decimal(2) ** -60
        literal = "[%s,-%s]" % (above, above)
        (sent,), = self.rows("SELECT cvec_send(%s::cvec)", (literal,))
        self.assertEqual(bytes(sent), _codec.encode_binary(_codec.decode_text(literal)))

    def test_register_errors(self):
        with self.assertRaises(self.error_class()):
            clustervec.register(self.conn, name=PREFIX + "no_such_type")
        with self.assertRaises(TypeError):
            clustervec.register(object())

    def test_register_pgvector(self):
        try:
            import pgvector  # noqa: F401
        except ImportError:
            self.assertFalse(clustervec.register_pgvector(self.conn))
            return
        (present,), = self.rows("SELECT to_regtype('vector') IS NOT NULL")
        if present:
            self.assertTrue(clustervec.register_pgvector(self.conn))
        else:
            with self.assertRaises(Exception):
                clustervec.register_pgvector(self.conn)
