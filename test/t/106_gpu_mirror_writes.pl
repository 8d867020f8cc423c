
# Mirrors under concurrent writes (issue 11, item 5): while pgbench loops
# INSERT, DELETE and VACUUM on the table, clustervec_gpu_warm is called over
# and over.  A mirror upload that finds a list changed under it (a VACUUM
# between its directory read and its list read) must start again or leave
# the index unmirrored for now, never call the index corrupted.  Then, with
# the writes stopped: a warm mirrors the index, clustervec_gpu_info counts
# the mirrors clustervec_gpu_mirrors lists, and the index verifies.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = cv_gpu_node('gpu_mirror_writes', qq{
autovacuum = off
max_worker_processes = 16
});

sub sql { return cv_sql($node, $_[0], 300); }

ok(defined cv_wait_for($node, "SELECT worker_state FROM clustervec_gpu_info()", 'ready', 60),
	'the worker is ready');

cv_load_clustered($node, 'items', rows => 20000, dims => 32, centres => 16);
sql(q{SET clustervec.gpu = off;
	CREATE INDEX items_idx ON items USING cvivf (v cvec_l2_ops) WITH (lists = 16)});

# Inserts and deletes spread over every list, and VACUUM as often as the
# clients get to it: directory counts change while an upload reads.
my $writes = cv_start_pgbench(
	$node, '-n -c 3 -j 3 -T 40',
	{
		'insert.sql' => q{
\set id random(100000, 100000000)
INSERT INTO items VALUES (:id, -1, cv_point((:id % 16)::int, 32, 2.0)) ON CONFLICT DO NOTHING;
},
		'delete.sql' => q{
\set id random(1, 20000)
DELETE FROM items WHERE id IN (:id, :id + 7, :id + 13);
},
		'vacuum.sql' => q{
VACUUM items;
},
	});

my ($calls, $made, $failed) = (0, 0, 0);
my @errors;
my $start = time();
while (time() - $start < 35 && cv_running($writes))
{
	my ($rc, $out, $err) = cv_try_sql($node,
		q{SET clustervec.gpu = require; SELECT clustervec_gpu_warm('items_idx')}, 120);
	$calls++;
	if ($rc eq '0')
	{
		$made++ if $out eq 't';
	}
	else
	{
		$failed++;
		push @errors, $err if @errors < 3;
	}
}
my ($pgbench_rc, $pgbench_out, $pgbench_err) = cv_finish_psql($writes);
is($pgbench_rc, 0, 'the write load ran without errors') or diag($pgbench_err);
cmp_ok($calls, '>=', 10, "clustervec_gpu_warm ran $calls times under the write load");
is($failed, 0, 'no warm failed while lists changed under it') or diag(join("\n", @errors));
cmp_ok($made, '>', 0, "$made of $calls warms left a mirror under the write load");
like($pgbench_out, qr/number of transactions actually processed: [1-9]/,
	'the writes did happen');

# writes stopped: one warm mirrors the index, and the counters agree
is(sql(q{SET clustervec.gpu = require; SELECT clustervec_gpu_warm('items_idx')}), 't',
	'a warm after the writes mirrors the index');
my $listed = sql(q{SELECT count(*), sum(bytes) FROM clustervec_gpu_mirrors()});
my ($count, $bytes) = split /\|/, $listed;
cmp_ok($count, '>=', 1, 'clustervec_gpu_mirrors lists the mirror');
cmp_ok($bytes, '>=', 16 * 32 * 4, 'and its bytes');
is(sql(q{SELECT mirrors || '|' || mirror_bytes FROM clustervec_gpu_info()}), "$count|$bytes",
	'clustervec_gpu_info counts the same mirrors and bytes');
cv_verify_ok($node, 'items_idx');

# A cursor over the mirror asks the worker again (64 rows, then 256) after
# rows came into the probed lists nearer than those it returned: it resumes
# after what it returned, by distance and identity, so no row comes twice
# (resuming by count repeated as many rows as came in).
sql(q{CREATE EXTENSION dblink;
CREATE TABLE grid (id int PRIMARY KEY, v cvec(2));
INSERT INTO grid SELECT i, ARRAY[(i % 100) + 1, (i / 100) + 1]::real[]::cvec
	FROM generate_series(0, 9999) i;
SET clustervec.gpu = off;
CREATE INDEX grid_idx ON grid USING cvivf (v) WITH (lists = 4);
CREATE TABLE fetched (n int, id int)});
is(sql(q{SET clustervec.gpu = require; SELECT clustervec_gpu_warm('grid_idx')}), 't',
	'the grid is mirrored');
sql(q{INSERT INTO grid SELECT 200000 + i, '[50,50]' FROM generate_series(1, 3) i});
my $connstr = 'host=' . $node->host . ' port=' . $node->port . ' dbname=postgres';
my $searches = sql(q{SELECT searches FROM clustervec_gpu_info()});
sql(qq{
BEGIN ISOLATION LEVEL REPEATABLE READ;
SET LOCAL enable_seqscan = off;
SET LOCAL clustervec.probes = 4;
SET LOCAL clustervec.gpu = require;
DO \$\$
DECLARE
	cur refcursor;
	r record;
BEGIN
	OPEN cur FOR SELECT id FROM grid ORDER BY v <-> '[0,0]';
	FOR i IN 1 .. 340 LOOP
		IF i = 41 THEN
			PERFORM dblink_exec('$connstr',
				'INSERT INTO grid SELECT 100000 + i, ''[1,1]'' FROM generate_series(1, 5) i');
		END IF;
		FETCH cur INTO r;
		EXIT WHEN NOT FOUND;
		INSERT INTO fetched VALUES (i, r.id);
	END LOOP;
END
\$\$;
COMMIT});
cmp_ok(sql(q{SELECT searches FROM clustervec_gpu_info()}), '>', $searches,
	'the GPU served the cursor');
is(sql(q{SELECT count(*) || '|' || count(DISTINCT id) FROM fetched}), '340|340',
	'340 rows fetched around a concurrent insert, none twice');
is(sql(q{SELECT count(*) FROM fetched WHERE id >= 100000 AND id < 200000}), '0',
	'and none of the rows the snapshot cannot see');

# A function whose index is dropped while it waits for the table (as REINDEX
# CONCURRENTLY drops the index it replaced) says so, instead of an internal
# "could not open relation with OID" error (the soak met one).
my $dropper = cv_start_psql($node,
	'BEGIN; DROP INDEX grid_idx; SELECT pg_sleep(3); COMMIT');
ok(defined cv_wait_for($node,
		q{SELECT count(*) > 0 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
		  WHERE c.relname = 'grid' AND l.mode = 'AccessExclusiveLock' AND l.granted},
		't', 30),
	'another session drops the index and holds the table');
my ($race_rc, $race_out, $race_err) = cv_try_sql($node,
	q{SELECT count(*) FROM cvsearch('grid_idx', ARRAY['[0,0]'::cvec], 5)}, 60);
like($race_err, qr/index with OID \d+ does not exist.*\n.*dropped while cvsearch waited for it/,
	'cvsearch whose index was dropped meanwhile says so');
cv_finish_psql($dropper);

$node->stop;
done_testing();
