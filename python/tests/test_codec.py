"""The wire forms alone (no server): binary and text, exact both ways."""

import struct
import unittest
from decimal import Decimal

import numpy as np

import clustervec
from clustervec import _codec
from common import FLT_MAX, random_vector, rng_for, same_bits, first_difference


class CodecTest(unittest.TestCase):

    def test_binary_layout(self):
        data = _codec.encode_binary(np.array([1.0, -2.0], dtype=np.float32))
        self.assertEqual(data, struct.pack(">hhff", 2, 0, 1.0, -2.0))
        self.assertTrue(same_bits(_codec.decode_binary(memoryview(data)), np.array([1, -2], np.float32)))

    def test_binary_round_trip_random(self):
        rng = rng_for(self.id())
        for dim in (1, 2, 17, 1000, 16000):
            v = random_vector(rng, dim)
            back = _codec.decode_binary(_codec.encode_binary(v))
            self.assertTrue(same_bits(v, back), first_difference(v, back))

    def test_text_round_trip_random(self):
        # our text out, our text in: exact (the server's side is in the driver tests)
        rng = rng_for(self.id())
        for dim in (1, 3, 999, 16000):
            v = random_vector(rng, dim)
            back = _codec.decode_text(_codec.encode_text(v))
            self.assertTrue(same_bits(v, back), first_difference(v, back))

    def test_text_shortest_forms(self):
        text = "[0.1,-0,1e-45,3.4028235e+38,1.1754944e-38, 2 ,-7.5]"
        expected = np.array([0.1, -0.0, 1e-45, FLT_MAX, 1.1754944e-38, 2, -7.5], dtype=np.float32)
        self.assertTrue(same_bits(_codec.decode_text(text), expected))
        self.assertTrue(same_bits(_codec.decode_text(text.encode()), expected))

    def test_text_double_rounding_midpoint(self):
        # 1 + 2**-24 is the midpoint between 1 and the next float32; a decimal
        # a hair above it rounds to the float64 midpoint, which round-half-even
        # would send down to 1.0: the right float32 is the upper one.
        above = Decimal(1) + Decimal(2) ** -24 + Decimal(2) ** -60
        below = Decimal(1) + Decimal(2) ** -24 - Decimal(2) ** -60
        exact_mid = Decimal(1) + Decimal(2) ** -24
        up = np.nextafter(np.float32(1), np.float32(2))
        got = _codec.decode_text("[%s,%s,%s,-%s]" % (above, below, exact_mid, above))
        self.assertEqual(got.tolist(), [float(up), 1.0, 1.0, -float(up)])
        # and one whose lower neighbour is odd: half-even goes up, the decimal is below
        odd = np.float32(1) + np.float32(2.0 ** -23)                 # 1 + 2**-23 (odd significand)
        mid = Decimal(float(odd)) + Decimal(2) ** -24
        got = _codec.decode_text("[%s,%s]" % (mid - Decimal(2) ** -60, mid + Decimal(2) ** -60))
        self.assertEqual(got.tolist(), [float(odd), float(np.nextafter(odd, np.float32(2)))])

    def test_malformed_text(self):
        for bad in ("", "[]", "1,2", "[1,,2]", "[1,x]", "[1,2"):
            with self.assertRaises(ValueError, msg=bad):
                _codec.decode_text(bad)

    def test_bad_values(self):
        with self.assertRaises(ValueError):
            _codec.encode_binary(np.zeros((2, 2), dtype=np.float32))
        with self.assertRaises(TypeError):
            _codec.encode_binary(np.array(["a"]))
        with self.assertRaises(ValueError):
            _codec.encode_binary(np.zeros(40000, dtype=np.float32))       # beyond int16
        with self.assertRaises(ValueError):
            _codec.decode_binary(b"\x00\x02\x00\x00\x00\x00\x00\x00")     # 2 dims, 1 element

    def test_conversions(self):
        self.assertTrue(same_bits(_codec.as_float32([1, 2, 3]), np.array([1, 2, 3], np.float32)))
        self.assertTrue(same_bits(clustervec.Cvec(np.array([0.1])).array, np.array([0.1], np.float32)))
        self.assertEqual(clustervec.Cvec([1, 2]), clustervec.Cvec(np.array([1, 2], np.float32)))
        self.assertEqual(len(clustervec.Cvec([1, 2, 3])), 3)
