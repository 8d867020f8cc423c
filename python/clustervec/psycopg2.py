"""psycopg2 adapters for ``cvec``: TEXT format both ways.

psycopg2 has no binary protocol: it interpolates parameters into the query
text on the client and receives every result column as text.  So:

* parameters (``numpy.ndarray``, :class:`clustervec.Cvec`) are sent as the
  literal ``'[e1,e2,...]'::cvec``, each float32 element written as its
  float64 widening in Python's shortest repr: exact, the server's strtof gives
  back the same float4 bit for bit (the literal is about twice as long as
  ``cvec_out``'s shortest float4 digits);
* results of type ``cvec`` (and ``cvec[]``) are parsed from ``cvec_out``'s
  text with numpy into float32 ndarrays, exactly (see ``clustervec._codec``).

For binary transfer use psycopg 3 (``clustervec.psycopg``).  To fetch the
binary form through psycopg2 anyway, select ``cvec_send(v)`` (a ``bytea``)
and decode it with ``clustervec.decode_binary``.

psycopg2 keys parameter adapters by Python class for the whole process, so
``register_cvec`` makes every ``numpy.ndarray`` parameter a ``cvec`` in every
connection (pgvector's ``register_vector`` does the same for ``vector``:
whichever registered last wins; ``clustervec.Cvec`` is always a cvec).  The
result casters are registered on the given connection or cursor only, unless
``globally=True``.
"""

import numpy as np
import psycopg2
from psycopg2.extensions import new_array_type, new_type, register_adapter, register_type

from . import _codec
from ._types import Cvec

__all__ = ["register_cvec"]

_type_sql = "cvec"      # how parameters name the type, from the last register_cvec


class _CvecAdapter:
    """psycopg2 adapter: the quoted text literal, cast to cvec."""

    def __init__(self, value):
        self._value = value

    def getquoted(self):
        try:
            text = _codec.encode_text(self._value)
        except (TypeError, ValueError) as e:     # not 1-d, not numbers, > 32767 elements
            raise psycopg2.DataError(str(e)) from e
        return ("'%s'::%s" % (text, _type_sql)).encode("ascii")


def _cast_cvec(value, cursor):
    if value is None:
        return None
    return _codec.decode_text(value)


def _lookup(scope, name):
    """(oid, array oid, type as SQL) of type ``name``."""
    conn = getattr(scope, "connection", scope)
    with conn.cursor() as cur:
        cur.execute("SELECT t.oid, t.typarray, format_type(t.oid, NULL) FROM pg_type AS t "
                    "WHERE t.oid = to_regtype(%s)", (name,))
        row = cur.fetchone()
    if row is None:
        raise psycopg2.ProgrammingError(
            "type %s not found in the database (CREATE EXTENSION clustervec)" % name)
    return row


def register_cvec(scope, name="cvec", globally=False):
    """Register the cvec adapters for a psycopg2 connection or cursor.

    Returns the type's oid."""
    global _type_sql
    oid, array_oid, type_sql = _lookup(scope, name)
    _type_sql = type_sql
    register_adapter(np.ndarray, _CvecAdapter)
    register_adapter(Cvec, _CvecAdapter)
    cvec_type = new_type((oid,), "CVEC", _cast_cvec)
    array_type = new_array_type((array_oid,), "CVEC[]", cvec_type)
    for t in (cvec_type, array_type):
        register_type(t, None if globally else scope)
    return oid
