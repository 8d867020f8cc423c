"""``cluster_health`` from Python: one call, a pandas DataFrame back."""

import math

from ._driver import driver_of

# cluster_health's optional arguments and the SQL type each is cast to.
PARAMETERS = {
    "order_column": "name",
    "outlier_z": "float8",
    "dup_cos": "float8",
    "neighbours": "int4",
    "sigma_bins": "int4",
    "entropy_bins": "int4",
    "rank_max_members": "int4",
    "progress": "bool",
}

_FLOAT_OIDS = {700, 701, 1700}      # float4, float8, numeric
_INT_OIDS = {20, 21, 23, 26}        # int8, int2, int4, oid


def relation_text(table):
    """``table`` as regclass input text.  A string is passed as it is (parsed
    like SQL: ``public.items``, ``"Mixed Case"``); a (schema, name) tuple is
    quoted part by part."""
    if isinstance(table, str):
        return table
    if isinstance(table, (tuple, list)) and table and all(isinstance(p, str) for p in table):
        return ".".join('"%s"' % p.replace('"', '""') for p in table)
    raise TypeError("table must be a string or a (schema, name) tuple, got %r" % (table,))


def _query(sql, params):
    """The composed statement; every value is a placeholder, parameter names
    come from PARAMETERS only and are quoted as identifiers."""
    named = [sql.SQL(", {} => {}::" + PARAMETERS[name]).format(sql.Identifier(name), sql.Placeholder(name))
             for name in params]
    return sql.SQL("SELECT * FROM cluster_health({}::text::regclass, {}::name, {}::name{}) "
                   "ORDER BY cluster").format(
        sql.Placeholder("source"), sql.Placeholder("label"), sql.Placeholder("vector"),
        sql.Composed(named))


def cluster_health(conn, table, label, vector, frame=None, **params):
    """Run ``cluster_health(table, label, vector, ...)`` and return its rows,
    ordered by cluster.

    ``conn`` is a psycopg 3 or psycopg2 connection (or cursor).  ``table`` is
    a table name as SQL spells it (a string cast to regclass server-side, so
    ``public.items`` and ``"My Items"`` work and nothing is formatted into the
    SQL text) or a (schema, name) tuple.  ``params`` are cluster_health's named
    arguments (outlier_z, dup_cos, neighbours, sigma_bins, entropy_bins,
    rank_max_members, order_column, progress); the server applies its
    defaults to the others.

    Returns a pandas DataFrame (float columns float64 with NaN for NULL;
    integer columns int64, or pandas' nullable Int64 when they hold NULLs,
    such as nearest_cluster with one cluster; text columns object) when pandas
    is importable and ``frame`` is not False; otherwise a list of dicts with
    None for NULL.  ``frame=True`` requires pandas.
    """
    unknown = sorted(set(params) - set(PARAMETERS))
    if unknown:
        raise TypeError("cluster_health() got unknown argument(s) %s; known: %s"
                        % (", ".join(unknown), ", ".join(PARAMETERS)))
    driver = driver_of(conn)
    values = dict(params, source=relation_text(table), label=label, vector=vector)
    cursor_owner = getattr(conn, "connection", None) if driver.is_cursor(conn) else conn
    with cursor_owner.cursor() as cur:
        cur.execute(_query(driver.sql, params), values)
        names = [d.name for d in cur.description]
        oids = [d.type_code for d in cur.description]
        rows = cur.fetchall()
    return _result(names, oids, rows, frame)


def health_history(conn, table, frame=None):
    """Every row of a cluster_health history table (the README's pg_cron
    snapshot: ``taken_at``, the ``summary_*`` columns, cluster_health's
    columns), ordered by ``taken_at`` (then ``cluster`` when it has one).
    ``table`` as for cluster_health; the server resolves it (regclass) and
    quotes it, so nothing of the caller's text is formatted into the SQL.
    Returns a DataFrame or a list of dicts, as cluster_health does."""
    driver = driver_of(conn)
    cursor_owner = getattr(conn, "connection", None) if driver.is_cursor(conn) else conn
    with cursor_owner.cursor() as cur:
        cur.execute("SELECT %(t)s::text::regclass::text, EXISTS (SELECT FROM pg_attribute "
                    "WHERE attrelid = %(t)s::text::regclass AND attname = 'cluster' "
                    "AND NOT attisdropped)", {"t": relation_text(table)})
        name, has_cluster = cur.fetchone()
        order = "taken_at, cluster" if has_cluster else "taken_at"
        cur.execute(driver.sql.SQL("SELECT * FROM {} ORDER BY " + order).format(driver.sql.SQL(name)))
        names = [d.name for d in cur.description]
        oids = [d.type_code for d in cur.description]
        rows = cur.fetchall()
    return _result(names, oids, rows, frame)


def _pandas(required):
    try:
        import pandas
    except ImportError:
        if required:
            raise
        return None
    return pandas


def _result(names, oids, rows, frame):
    pd = None if frame is False else _pandas(required=frame is True)
    if pd is None:
        return [dict(zip(names, row)) for row in rows]
    import numpy as np
    columns = {}
    for i, (name, oid) in enumerate(zip(names, oids)):
        values = [row[i] for row in rows]
        if oid in _FLOAT_OIDS:
            columns[name] = np.array([math.nan if v is None else float(v) for v in values],
                                     dtype=np.float64)
        elif oid in _INT_OIDS:
            if any(v is None for v in values):
                columns[name] = pd.array(values, dtype="Int64")
            else:
                columns[name] = np.array(values, dtype=np.int64)
        else:
            columns[name] = pd.Series(values, dtype=object)
    return pd.DataFrame(columns, columns=names)
