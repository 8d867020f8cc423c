"""psycopg 3 adapters for ``cvec``.

``register_cvec(conn)`` looks up the oid of ``cvec`` (and of ``cvec[]``) in
the connected database and registers on that connection (or cursor):

* dumpers for ``numpy.ndarray`` and :class:`clustervec.Cvec`, **binary**
  (``cvec_recv``'s format) for ``%s`` and ``%b`` placeholders, text for
  ``%t``; parameters are typed ``cvec`` by oid, so a dimension mismatch with a
  ``cvec(n)`` column or another operand is the server's error
  (``psycopg.errors.DataException``).  Lists of arrays go as ``cvec[]``;
  binary ``COPY`` works after ``copy.set_types(["cvec"])``.
* loaders returning float32 ``numpy.ndarray``: the binary loader reads
  ``cvec_send``'s format and is used for results in binary format
  (``conn.cursor(binary=True)`` or ``cur.execute(..., binary=True)``); the
  text loader parses ``[1,2,3]`` exactly (see ``clustervec._codec``) and is
  used by ordinary (text) cursors.  psycopg 3 chooses the result format per
  cursor, so ask for binary where the volume matters.

Both directions are exact bit for bit.  A bare ``numpy.ndarray`` is dumped by
whichever adapter registered last on the connection: if pgvector's
``register_vector`` is also used, wrap values in ``clustervec.Cvec`` (or
``pgvector.Vector``) to say which type they are.  Synchronous connections
only.
"""

import psycopg
from psycopg.adapt import Dumper, Loader
from psycopg.pq import Format
from psycopg.types import TypeInfo

from . import _codec
from ._types import Cvec

__all__ = ["register_cvec"]


def _encode(encoder, obj):
    # a value no cvec can hold (2-d, not numbers, over 32767 elements) is the
    # driver's DataError, like the server's refusals
    try:
        return encoder(obj)
    except (TypeError, ValueError) as e:
        raise psycopg.DataError(str(e)) from e


class _CvecBinaryDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj):
        return _encode(_codec.encode_binary, obj)


class _CvecTextDumper(Dumper):
    format = Format.TEXT

    def dump(self, obj):
        return _encode(_codec.encode_text, obj).encode("ascii")


class _CvecBinaryLoader(Loader):
    format = Format.BINARY

    def load(self, data):
        return _codec.decode_binary(data)


class _CvecTextLoader(Loader):
    format = Format.TEXT

    def load(self, data):
        return _codec.decode_text(data)


def fetch_type_info(context, name="cvec"):
    """The TypeInfo of ``name`` (may be schema-qualified) in the database of
    ``context``; ``psycopg.ProgrammingError`` when it does not exist."""
    conn = getattr(context, "connection", context)
    info = TypeInfo.fetch(conn, name)
    if info is None:
        raise psycopg.ProgrammingError(
            "type %s not found in the database (CREATE EXTENSION clustervec)" % name)
    return info


def register_cvec(context, name="cvec"):
    """Register the cvec adapters on a psycopg 3 connection or cursor.

    Returns the ``TypeInfo`` of the type (``.oid``, ``.array_oid``)."""
    info = fetch_type_info(context, name)
    info.register(context)              # the oids, so that cvec[] works too
    adapters = context.adapters
    text_dumper = type("CvecTextDumper", (_CvecTextDumper,), {"oid": info.oid})
    binary_dumper = type("CvecBinaryDumper", (_CvecBinaryDumper,), {"oid": info.oid})
    for cls in ("numpy.ndarray", Cvec):
        # text first, binary last: the last one registered serves %s
        adapters.register_dumper(cls, text_dumper)
        adapters.register_dumper(cls, binary_dumper)
    adapters.register_loader(info.oid, _CvecTextLoader)
    adapters.register_loader(info.oid, _CvecBinaryLoader)
    return info
