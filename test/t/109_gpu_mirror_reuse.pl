
# Space reuse under a GPU mirror (issue 14, item 1).  A mirror records
# where each list ended; rows past that end are read from the pages and
# merged.  An insert that fills a slot in a list's dead tail lies after
# every live tuple, so after the mirror's end: the mirror keeps serving and
# the row is merged.  An insert that fills a slot inside a list leaves the
# generation alone; a scan that probes such a list sees its count above the
# mirrored rows plus its tail and reads on the CPU, until VACUUM makes a new
# generation to mirror or clustervec_gpu_warm refreshes the mirror.  Either
# way the answers are those of an exact search.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = cv_gpu_node('gpu_mirror_reuse', "autovacuum = off\n");

sub sql { return cv_sql($node, $_[0], 300); }

ok(defined cv_wait_for($node, "SELECT worker_state FROM clustervec_gpu_info()", 'ready', 60),
	'the worker is ready');

cv_load_clustered($node, 'items', rows => 8000, dims => 16, centres => 16, seed => 0.3);
sql(q{
CREATE INDEX items_v ON items USING cvivf (v) WITH (lists = 16);
CREATE TABLE queries AS SELECT id AS qid, v FROM items WHERE id % 400 IN (7, 8);
-- the rows loaded last lie at the end of their lists: their slots become dead tails
CREATE TABLE kept AS SELECT * FROM items WHERE id > 6000;
DELETE FROM items WHERE id > 6000;
VACUUM items;
});

# The 10 nearest rows of each query, through the index (at every list) or exactly.
sub answers
{
	my ($mode) = @_;
	my $settings =
	  $mode eq 'exact'
	  ? 'SET enable_indexscan = off; SET enable_bitmapscan = off;'
	  : "SET clustervec.gpu = $mode; SET enable_seqscan = off; SET clustervec.probes = 16;";
	return sql(qq{$settings
SELECT string_agg(concat_ws(' ', q.qid, x.id), ',' ORDER BY q.qid, x.d, x.id)
FROM queries q, LATERAL (SELECT id, v <-> q.v AS d FROM items ORDER BY v <-> q.v LIMIT 10) x});
}

# How EXPLAIN ANALYZE says the index scan was served.
sub served
{
	my $q = sql('SELECT v FROM queries ORDER BY qid LIMIT 1');
	my $plan = sql(qq{SET clustervec.gpu = auto; SET enable_seqscan = off;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT id FROM items ORDER BY v <-> '$q' LIMIT 10});
	my ($line) = $plan =~ /(clustervec: [^\n]*)/;
	return $line // $plan;
}

is(sql(q{SET clustervec.gpu = require; SELECT clustervec_gpu_warm('items_v')}), 't',
	'a mirror after VACUUM');
like(served(), qr/on the GPU worker/, 'the mirror serves the index scan');
my $size = sql(q{SELECT pg_relation_size('items_v')});

# dead tails refilled: no new generation, the mirror keeps serving
sql('INSERT INTO items SELECT * FROM kept');
is(sql(q{SELECT pg_relation_size('items_v')}), $size, 'the rows went back into the dead tails');
like(served(), qr/on the GPU worker/, 'after filling dead tails the mirror still serves');
my $exact = answers('exact');
is(answers('require'), $exact, 'and its answers, merged with the refilled rows, are exact');
like($exact, qr/ 60\d\d\b/, 'the refilled rows are among the answers');

# slots inside the lists refilled: scans of those lists read on the CPU
sql('DELETE FROM items WHERE id % 10 = 0 AND id <= 6000; VACUUM items');
is(sql(q{SET clustervec.gpu = require; SELECT clustervec_gpu_warm('items_v')}), 't',
	'a mirror after the second VACUUM');
like(served(), qr/on the GPU worker/, 'it serves');
# new points of the centres whose rows were deleted (i % 16 even), so into lists with dead slots
sql(q{SELECT setseed(0.5);
INSERT INTO items SELECT 100000 + i, (i * 10) % 16, cv_point((i * 10) % 16, 16, 2.0)
FROM generate_series(1, 200) i});
is(sql(q{SELECT pg_relation_size('items_v')}), $size, 'the rows filled slots inside the lists');
like(served(), qr/on the CPU: rows were inserted into freed slots of its lists/,
	'after filling slots inside the lists, a scan of them reads on the CPU, and says why');
is(sql(q{SELECT count(*) FROM clustervec_gpu_mirrors()}), '1', 'the mirror stays');
$exact = answers('exact');
is(answers('auto'), $exact, 'the answers are exact');
is(answers('require'), $exact, 'also under require: this is no failure of the worker');
like($exact, qr/ 1\d{5}\b/, 'the rows in refilled slots are among the answers');
is(sql(q{SET clustervec.gpu = require;
SELECT string_agg(concat_ws(' ', s.query_no, i.id), ',' ORDER BY s.query_no, s.distance, i.id)
FROM cvsearch('items_v', ARRAY(SELECT v FROM queries ORDER BY qid), 10, 16) s
JOIN items i ON i.ctid = s.tid}) =~ s/(^|,)(\d+) /$1 . ($2) . ' '/ger,
	sql(q{SELECT string_agg(concat_ws(' ', n, id), ',' ORDER BY n, d, id) FROM (
	SELECT row_number() OVER (ORDER BY qid) AS n, q.v AS qv FROM queries q) q,
	LATERAL (SELECT id, v <-> q.qv AS d FROM items ORDER BY v <-> q.qv LIMIT 10) x}),
	'cvsearch over the lists with filled slots answers exactly too');
is(sql(q{SET clustervec.gpu = require; SELECT clustervec_gpu_warm('items_v')}), 't',
	'clustervec_gpu_warm refreshes the mirror of the same generation');
is(sql(q{SELECT count(*) FROM clustervec_gpu_mirrors()}), '1', 'which replaced the old one');
like(served(), qr/on the GPU worker/, 'it serves');
is(answers('require'), $exact, 'its answers are exact');
cv_verify_ok($node, 'items_v', 'cvivf_verify');

$node->stop;
done_testing();
