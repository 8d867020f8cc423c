
# cvivf_retrain beside the GPU worker: k-means and the assignment run on the
# worker (its index-build counter moves), the index is the one the CPU path
# makes from the same rows and seed (CPU library in CI: bit for bit, so the
# same lists; on the H200 rows may change list on near ties), and the
# mirror of the old generation is never used for the new one: after the
# retrain the worker serves scans from a mirror of the new lists, with the
# CPU path's answers.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $real_gpu = cv_gpu_library() eq 'clustervec_cuda';
my $dims = 24;
my $node = cv_gpu_node('gpu_retrain', "max_worker_processes = 16\n");

sub sql { return cv_sql($node, $_[0], 300); }

ok(defined cv_wait_for($node, "SELECT worker_state FROM clustervec_gpu_info()", 'ready', 60),
	'the worker is ready');

cv_load_clustered($node, 'items', rows => 12000, dims => $dims, centres => 30, sigma => 2.0,
	seed => 0.21);
sql(q{CREATE TABLE twin AS SELECT * FROM items});
sql(q{CREATE INDEX items_idx ON items USING cvivf (v) WITH (lists = 30, seed = 4)});
sql(q{CREATE INDEX twin_idx ON twin USING cvivf (v) WITH (lists = 30, seed = 4)});
# the data moves, the same way in both tables
sql(qq{SELECT setseed(0.6);
	INSERT INTO items (id, c, v) SELECT 100000 + i, 100 + i % 10, cv_point(100 + i % 10, $dims, 2.0)
		FROM generate_series(1, 8000) i;
	INSERT INTO twin SELECT * FROM items WHERE id > 100000});

# a mirror of the old generation, used by scans
is(sql(q{SET clustervec.gpu = require; SELECT clustervec_gpu_warm('items_idx')}), 't',
	'the old generation is mirrored');
my $q = "SELECT id FROM items ORDER BY v <-> cv_keyed_point(104, $dims, 2.0, 7) LIMIT 10";

my $builds = sql(q{SELECT index_builds FROM clustervec_gpu_info()});
sql(q{SET clustervec.gpu = require; SELECT * FROM cvivf_retrain('items_idx')});
cmp_ok(sql(q{SELECT index_builds FROM clustervec_gpu_info()}), '>', $builds,
	'the retrain ran k-means on the worker');
sql(q{SET clustervec.gpu = off; SELECT * FROM cvivf_retrain('twin_idx')});

my $lists = sql(q{SELECT string_agg(tuples::text, ',' ORDER BY list) FROM cvivf_lists('items_idx')});
my $twin_lists = sql(q{SELECT string_agg(tuples::text, ',' ORDER BY list) FROM cvivf_lists('twin_idx')});
if ($real_gpu)
{
	my $moved = sql(q{SELECT sum(abs(a.tuples - b.tuples)) FROM cvivf_lists('items_idx') a
		JOIN cvivf_lists('twin_idx') b USING (list)});
	cmp_ok($moved, '<=', 200, "GPU and CPU retrains: list sizes differ by $moved rows in all");
}
else
{
	is($lists, $twin_lists, 'the worker\'s retrain made the CPU path\'s lists');
}
cv_verify_ok($node, 'items_idx');
cv_reachable_ok($node, 'items', 'items_idx', name => 'after the GPU retrain');

# scans: the worker serves them from a mirror of the new generation
ok(defined cv_wait_for($node,
		q{SET clustervec.gpu = require; SELECT clustervec_gpu_warm('items_idx')}, 't', 60),
	'the new generation is mirrored');
is(sql("SET clustervec.gpu = require; SET clustervec.probes = 30; $q"),
	sql("SET clustervec.gpu = off; SET clustervec.probes = 30; $q"),
	'a scan served by the worker after the retrain answers as the CPU path');
my $explain = sql("SET clustervec.gpu = require; SET clustervec.probes = 4;
	EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) $q");
like($explain, qr/on the GPU worker \(\d+ answer/, 'EXPLAIN ANALYZE says the worker served it');
is(sql("SET clustervec.gpu = require; SET clustervec.probes = 4; $q"),
	sql("SET clustervec.gpu = off; SET clustervec.probes = 4; $q"),
	'at probes 4 too');

$node->stop;
done_testing();
