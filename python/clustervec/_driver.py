"""Which driver a connection belongs to, without importing the other one."""

import sys


class _Driver:
    def __init__(self, name, module, sql, connection_types, cursor_types):
        self.name = name
        self.module = module
        self.sql = sql
        self._connection_types = connection_types
        self._cursor_types = cursor_types

    def owns(self, obj):
        return isinstance(obj, self._connection_types + self._cursor_types)

    def is_cursor(self, obj):
        return isinstance(obj, self._cursor_types)


def _psycopg3():
    import psycopg
    from psycopg import sql
    return _Driver("psycopg", psycopg, sql, (psycopg.Connection,), (psycopg.Cursor,))


def _psycopg2():
    import psycopg2
    import psycopg2.extensions
    from psycopg2 import sql
    return _Driver("psycopg2", psycopg2, sql, (psycopg2.extensions.connection,),
                   (psycopg2.extensions.cursor,))


def driver_of(conn):
    """The driver of a psycopg 3 or psycopg2 connection or cursor; only a
    driver already imported can own it."""
    for module, make in (("psycopg", _psycopg3), ("psycopg2", _psycopg2)):
        if module in sys.modules:
            driver = make()
            if driver.owns(conn):
                return driver
    raise TypeError("expected a psycopg 3 or psycopg2 connection or cursor, got %s"
                    % type(conn).__name__)
