"""The two wire forms of ``cvec`` (the same as pgvector's ``vector``), shared by
both drivers' adapters.

Binary (``cvec_send`` / ``cvec_recv``): int16 dimension count, int16 unused
(0), then every element as a big-endian IEEE float4.  Text (``cvec_in`` /
``cvec_out``): ``[1,2.5,-0.03]``.

Both directions are exact, bit for bit, for every finite float32 (including
-0.0 and subnormals):

* binary is a byte swap;
* text out sends each float32 widened to float64 in Python's shortest repr
  (up to 17 digits, never closer than 2**-25 relative to a float4 rounding
  midpoint, so the server's strtof gives back the same float4);
* text in parses with numpy to float64, then rounds to float32.  Rounding
  twice is wrong only when the float64 lands exactly on a float32 midpoint
  while the decimal was not on it; those few elements are decided again from
  the exact decimal value (``decimal.Decimal``).
"""

import struct
from decimal import Decimal

import numpy as np

MAX_DIM = 16000            # the server's limit (pgvector's)
_HEADER = struct.Struct(">hh")
_BIG_F4 = np.dtype(">f4")


def as_float32(value):
    """``value`` (ndarray, Cvec, sequence of numbers) as a 1-d float32 ndarray.

    Other float dtypes are rounded to nearest float32, as the server rounds
    float8 to float4; out-of-range values become infinities, which the server
    refuses with its own error.
    """
    array = getattr(value, "array", value)      # Cvec
    array = np.asarray(array)
    if array.ndim != 1:
        raise ValueError("a cvec is a one-dimensional array, got shape %s" % (array.shape,))
    if array.dtype == np.float32:
        return array
    if array.dtype.kind not in "fiub":
        raise TypeError("a cvec holds real numbers, got an array of dtype %s" % array.dtype)
    with np.errstate(over="ignore"):
        return array.astype(np.float32)


def _check_dim(dim):
    # The header holds the count in an int16; the server checks 1..16000.
    if dim > 32767:
        raise ValueError("a cvec has at most %d dimensions, got %d" % (MAX_DIM, dim))


def encode_binary(value):
    """The ``cvec_recv`` form of ``value`` as bytes."""
    array = as_float32(value)
    _check_dim(array.size)
    return _HEADER.pack(array.size, 0) + array.astype(_BIG_F4, copy=False).tobytes()


def decode_binary(data):
    """A ``cvec_send`` buffer (bytes, memoryview) as a float32 ndarray."""
    dim, _unused = _HEADER.unpack_from(data)
    if len(data) != 4 + 4 * dim:
        raise ValueError("cvec binary value of %d bytes for %d dimensions" % (len(data), dim))
    return np.frombuffer(data, dtype=_BIG_F4, count=dim, offset=4).astype(np.float32)


def encode_text(value):
    """The ``cvec_in`` form of ``value``: ``[e1,e2,...]``."""
    array = as_float32(value)
    _check_dim(array.size)
    return "[" + ",".join(map(repr, array.tolist())) + "]"


def decode_text(data):
    """``cvec_out``'s ``[1,2.5,-0.03]`` (str, bytes, memoryview) as a float32
    ndarray, each element the correctly rounded float32 of its decimal."""
    if not isinstance(data, str):
        data = bytes(data).decode("ascii")
    text = data.strip()
    if len(text) < 2 or text[0] != "[" or text[-1] != "]":
        raise ValueError("malformed cvec literal: %.60r" % text)
    body = text[1:-1]
    wide = np.fromstring(body, dtype=np.float64, sep=",")
    if wide.size != body.count(",") + 1:
        raise ValueError("malformed cvec literal: %.60r" % text)
    narrow = wide.astype(np.float32)
    _redo_midpoints(body, wide, narrow)
    return narrow


def _redo_midpoints(body, wide, narrow):
    """Fix, in place, elements whose float64 lies exactly on a float32
    rounding midpoint: round-half-even chose a side the decimal may not be on."""
    back = narrow.astype(np.float64)
    inexact = np.nonzero(wide != back)[0]
    if inexact.size == 0:
        return
    toward = np.where(wide[inexact] > back[inexact], np.float32(np.inf), np.float32(-np.inf))
    with np.errstate(over="ignore", invalid="ignore"):
        other = np.nextafter(narrow[inexact], toward)
        middle = (back[inexact] + other.astype(np.float64)) / 2     # exact in float64
    ties = inexact[wide[inexact] == middle]
    if ties.size == 0:
        return
    tokens = body.split(",")
    for i in ties.tolist():
        exact = Decimal(tokens[i].strip())
        mid = Decimal(float(wide[i]))
        if exact == mid:
            continue                                   # a true tie: half-even is right
        here = narrow[i]
        if exact > mid:     # the float32 just above the midpoint
            narrow[i] = here if float(here) > mid else np.nextafter(here, np.float32(np.inf))
        else:               # the float32 just below it
            narrow[i] = here if float(here) < mid else np.nextafter(here, np.float32(-np.inf))
