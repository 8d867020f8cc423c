"""clustervec: the Python client of the clustervec PostgreSQL extension.

* ``register(conn)``: cvec adapters (numpy float32 arrays) for a psycopg 3
  connection (binary parameters and binary-cursor results) or a psycopg2 one
  (text, exact); see ``clustervec.psycopg`` and ``clustervec.psycopg2``.
* ``register_pgvector(conn)``: pgvector's own adapters for ``vector``
  columns, from the ``pgvector`` package, when it is installed.
* ``cluster_health(conn, table, label, vector, **params)``: a DataFrame.
* ``report(df, path, title=None)``: one self-contained HTML page
  (``python3 -m clustervec.report`` does both from the command line).
* ``health_history(conn, table)`` and ``history_report(df, path)``: a
  cluster_health history table (the README's pg_cron snapshot) and its HTML
  page of drift over time (``python3 -m clustervec.report --history``).
"""

from ._codec import decode_binary, decode_text, encode_binary, encode_text
from ._driver import driver_of
from ._types import Cvec
from .health import cluster_health, health_history

__version__ = "0.1.0"

__all__ = ["Cvec", "cluster_health", "decode_binary", "decode_text", "encode_binary",
           "encode_text", "health_history", "history_report", "register", "register_pgvector",
           "report"]


def register(conn, name="cvec"):
    """Register the cvec adapters on ``conn`` (a psycopg 3 or psycopg2
    connection or cursor), whichever driver it belongs to.  Returns the
    driver's name, "psycopg" or "psycopg2"."""
    driver = driver_of(conn)
    if driver.name == "psycopg":
        from .psycopg import register_cvec
    else:
        from .psycopg2 import register_cvec
    register_cvec(conn, name)
    return driver.name


def register_pgvector(conn):
    """Register pgvector's adapters for its ``vector`` type on ``conn``,
    through the ``pgvector`` package (``pip install pgvector``); clustervec
    does not re-implement them.  Returns False, registering nothing, when
    that package is not importable; errors of pgvector's own (no ``vector``
    type in the database) propagate.

    Both packages claim bare ``numpy.ndarray`` parameters, and the one
    registered last wins; wrap values in ``clustervec.Cvec`` or
    ``pgvector.Vector`` when a connection uses both types."""
    driver = driver_of(conn)
    try:
        if driver.name == "psycopg":
            from pgvector.psycopg import register_vector
        else:
            from pgvector.psycopg2 import register_vector
    except ImportError:
        return False
    register_vector(conn)
    return True


def report(df, path, title=None):
    """Write the HTML report of a cluster_health result to ``path``; returns
    ``path``.  Needs matplotlib (imported only here)."""
    from ._report import report as write_report
    return write_report(df, path, title=title)


def history_report(df, path, title=None):
    """Write the HTML page of a cluster_health history (``health_history``'s
    rows) to ``path``; returns ``path``.  Needs matplotlib."""
    from ._history import history_report as write_history
    return write_history(df, path, title=title)
