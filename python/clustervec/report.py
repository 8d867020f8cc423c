"""Command line: run cluster_health on a table and write the HTML report,
or render a cluster_health history table (the README's pg_cron snapshot).

    python3 -m clustervec.report --dsn DSN --table T --label L --vector V \\
        --out PATH [--title TITLE] [--param NAME=VALUE ...]
    python3 -m clustervec.report --dsn DSN --history TABLE --out PATH [--title TITLE]

Prints the path of the written file (absolute) on stdout.  Connects with
psycopg 3 when it is installed, else psycopg2; an empty DSN takes libpq's
environment (PGHOST, PGPORT, PGUSER, PGDATABASE).  ``--param`` passes one of
cluster_health's named arguments (outlier_z, dup_cos, neighbours, sigma_bins,
entropy_bins, rank_max_members, order_column, progress); the server casts the
text to the argument's type.

As a module attribute, ``clustervec.report`` stays callable as the function
``report(df, path, title=None)`` even after ``import clustervec.report``.
"""

import argparse
import os
import sys
import types

from ._report import report
from .health import PARAMETERS, cluster_health, health_history


def _connect(dsn):
    try:
        import psycopg
    except ImportError:
        import psycopg2
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        return conn
    return psycopg.connect(dsn, autocommit=True)


def _params(pairs):
    params = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or name not in PARAMETERS:
            raise SystemExit("--param wants NAME=VALUE with NAME one of %s, got %r"
                             % (", ".join(PARAMETERS), pair))
        params[name] = value
    return params


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python3 -m clustervec.report",
        description="Run cluster_health on a table and write one self-contained HTML report, "
                    "or (--history) render a cluster_health history table over time.")
    parser.add_argument("--dsn", required=True, help="libpq connection string ('' for the environment)")
    parser.add_argument("--table", help="table, as SQL spells it (schema.name, \"Quoted\")")
    parser.add_argument("--label", help="the cluster label column")
    parser.add_argument("--vector", help="the cvec column")
    parser.add_argument("--history", metavar="TABLE",
                        help="a history table (taken_at, summary_* and cluster_health's columns) "
                             "instead of --table/--label/--vector")
    parser.add_argument("--out", required=True, help="the HTML file to write")
    parser.add_argument("--title", help="page title (default: names the table)")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="a cluster_health argument, e.g. outlier_z=2.5 (repeatable)")
    args = parser.parse_args(argv)
    if args.history is not None:
        if args.table or args.label or args.vector or args.param:
            parser.error("--history takes no --table, --label, --vector or --param")
    elif not (args.table and args.label and args.vector):
        parser.error("--table, --label and --vector are required (or --history TABLE)")
    params = _params(args.param)
    conn = _connect(args.dsn)
    try:
        if args.history is not None:
            df = health_history(conn, args.history)
        else:
            df = cluster_health(conn, args.table, args.label, args.vector, **params)
    finally:
        conn.close()
    if args.history is not None:
        from ._history import history_report
        history_report(df, args.out, title=args.title or "cluster_health history of %s" % args.history)
    else:
        title = args.title or "cluster_health of %s (%s by %s)" % (args.table, args.vector, args.label)
        report(df, args.out, title=title)
    print(os.path.abspath(args.out))
    return 0


class _CallableModule(types.ModuleType):
    """Importing a submodule rebinds the package attribute of its name to the
    module; this keeps ``clustervec.report(df, path)`` working afterwards."""

    def __call__(self, data, path, title=None):
        return report(data, path, title=title)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    sys.exit(main())
