#!/usr/bin/python3
"""Run the clustervec Python client tests; the last line of output is
"N passed, N failed" and the exit status is 1 when anything failed.

    PYTHONPATH=python /usr/bin/python3 python/tests/run.py [NAME_PART ...]

Against a live server with the clustervec extension installed: libpq's
environment (PGHOST, PGPORT, PGUSER, PGDATABASE) names it, as for
test/numeric; the database gets CREATE EXTENSION IF NOT EXISTS clustervec.
Every test_*.py of this folder runs (or only the tests whose id contains one
of the NAME_PARTs).  Output: "PASS id" / "FAIL id: reason" / "SKIP id:
reason" per test; skips are in neither count.  CV_TEST_SEED repeats a run's
random numbers.
"""

import os
import sys
import time
import traceback
import unittest

TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(TESTS), TESTS]          # the package, then common.py

from common import SEED  # noqa: E402


class CountingResult(unittest.TestResult):
    """Prints one line per test and counts."""

    def __init__(self):
        super().__init__()
        self.passed = 0
        self.failed = 0
        self.skipped = 0
        self._start = 0.0

    def startTest(self, test):
        super().startTest(test)
        self._start = time.monotonic()

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed += 1
        print("PASS %s (%.1f s)" % (test.id(), time.monotonic() - self._start), flush=True)

    def _fail(self, test, err):
        self.failed += 1
        text = "".join(traceback.format_exception(*err)).rstrip()
        print("FAIL %s: %s" % (test.id(), text), flush=True)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._fail(test, err)

    def addError(self, test, err):            # also setUpClass / import errors
        super().addError(test, err)
        self._fail(test, err)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.skipped += 1
        print("SKIP %s: %s" % (test.id(), reason), flush=True)

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._fail(test, (AssertionError, AssertionError("unexpected success"), None))


def flatten(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from flatten(item)
        else:
            yield item


def prepare_database():
    """CREATE EXTENSION IF NOT EXISTS clustervec in the test database."""
    import psycopg2
    conn = psycopg2.connect("")
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("SET client_min_messages = warning")
            cur.execute("CREATE EXTENSION IF NOT EXISTS clustervec")
            cur.execute("SELECT current_database(), extversion FROM pg_extension WHERE extname = 'clustervec'")
            return cur.fetchone()
    finally:
        conn.close()


def main(argv):
    print("clustervec Python client tests; seed %d (CV_TEST_SEED=%d repeats this run)" % (SEED, SEED))
    try:
        database, version = prepare_database()
    except Exception as e:                   # no server, no extension, no driver
        print("FAIL setup: cannot prepare the test database: %s" % " ".join(str(e).split()))
        print("0 passed, 1 failed")
        return 1
    print("database %s, clustervec %s, Python %s" % (database, version, sys.version.split()[0]))
    suite = unittest.defaultTestLoader.discover(TESTS, pattern="test_*.py", top_level_dir=TESTS)
    if argv:
        suite = unittest.TestSuite(t for t in flatten(suite) if any(part in t.id() for part in argv))
    result = CountingResult()
    suite.run(result)
    if result.passed + result.failed == 0:
        print("FAIL setup: no test ran")
        result.failed = 1
    print("%d passed, %d failed" % (result.passed, result.failed))
    return 0 if result.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
