
# clustervec_pgvector (issue 14, item 3): cvivf and cvlattice over
# pgvector's vector columns.  Runs only where pgvector is installed (Debian
# 12 and CI have no package: the file is skipped with one line there).
#
# The same rows as cvec (table tc) and as vector (table tv), the same index
# options, so the same centroids:
# - every metric (L2, inner product, cosine), cvivf and cvlattice, with and
#   without a label condition: the index on tv returns the same rows in the
#   same order at the same distances as the index on tc (distances by
#   cvec_*_distance(vector, vector), the float64 values the index orders by);
#   the plans use the index; cvsearch over both indexes answers the same;
# - cluster_health (table and query forms), cluster_stats(vector) and
#   cvsearch_exact equal their cvec answers;
# - casts both ways, type modifiers, assignment; pgvector's own ivfflat
#   index with its vector_l2_ops beside ours;
# - a vector holding NaN or infinity (as pgvector before 0.4.4 stored from
#   binary input; made here through a binary cast from bytea) is refused by
#   the cast, the index build, inserts, scans, cluster_health, cluster_stats
#   and cvsearch_exact;
# - the GPU paths (the worker on the CPU library in CI): cluster_health of
#   the vector column equals the cvec copy's; CREATE INDEX on it is served;
#   cvsearch and index scans over the mirror of the vector index answer as
#   the CPU path over the same index.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = cv_gpu_node('pgvector', "maintenance_work_mem = 64MB\nmax_worker_processes = 16\n");

if ($node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'}) eq '0')
{
	plan skip_all => 'pgvector (extension "vector") is not installed';
}

sub sql { return cv_sql($node, $_[0], 300); }

my $dims = 16;
my $queries = 25;

sql(q{CREATE EXTENSION vector; CREATE EXTENSION clustervec_pgvector;});
cv_load_clustered($node, 'tc', rows => 4000, dims => $dims, centres => 20, sigma => 3.0);
# a NULL vector and a zero vector (which the cosine classes leave out)
sql(qq{
INSERT INTO tc VALUES (100001, 3, NULL), (100002, 4, array_fill(0, ARRAY[$dims])::real[]::cvec);
CREATE TABLE tv (id bigint PRIMARY KEY, c int, v vector($dims));
INSERT INTO tv SELECT id, c, v::vector FROM tc ORDER BY id;
CREATE TABLE q AS SELECT i AS qid, i % 20 AS c, cv_keyed_point(i % 20, $dims, 3.0, i) AS qc
	FROM generate_series(1, $queries) i;
ALTER TABLE q ADD COLUMN qv vector($dims);
UPDATE q SET qv = qc;
ANALYZE tc; ANALYZE tv; ANALYZE q;
});

is(sql(q{SELECT count(*) FROM tc JOIN tv USING (id)
	WHERE tv.v IS DISTINCT FROM tc.v::vector OR tv.v::cvec IS DISTINCT FROM tc.v}),
	'0', 'vector and cvec copies of 4002 rows convert to each other unchanged');

# ---------------------------------------------------------------- casts
is(sql(q{SELECT '[1,2.5,-3e-2]'::vector::cvec::text || ' ' || '[1,2.5,-3e-2]'::cvec::vector::text}),
	'[1,2.5,-0.03] [1,2.5,-0.03]', 'casts both ways keep every element');
is(sql(q{SELECT pg_column_size('[1,2,3]'::vector) = pg_column_size('[1,2,3]'::vector::cvec)}),
	't', 'the cast keeps the size');
is(sql(q{SELECT '[1,2,3]'::vector::cvec(3)::text || ' ' || '[1,2,3]'::cvec(3)::vector(3)::text}),
	'[1,2,3] [1,2,3]', 'casts to a type with a modifier of the right dimensions');
like((cv_try_sql($node, q{SELECT '[1,2,3]'::vector::cvec(2)}))[2],
	qr/expected 2 dimensions, not 3/, 'vector to cvec(2) checks the dimensions');
like((cv_try_sql($node, q{SELECT '[1,2,3]'::cvec::vector(2)}))[2],
	qr/expected 2 dimensions, not 3/, 'cvec to vector(2) checks them by pgvector\'s rule');
is(sql(q{CREATE TABLE assigned (c cvec(3), v vector(3));
	INSERT INTO assigned SELECT '[1,2,3]'::vector, '[4,5,6]'::cvec;
	SELECT c::text || ' ' || v::text FROM assigned}),
	'[1,2,3] [4,5,6]', 'both casts apply on assignment');
is(sql(q{SELECT castmethod FROM pg_cast WHERE castsource = 'cvec'::regtype AND casttarget = 'vector'::regtype}),
	'b', 'cvec to vector is binary-coercible');

# ---------------------------------------------------------------- indexes
my $settings = q{SET enable_seqscan = off; SET enable_bitmapscan = off;
SET clustervec.iterative_scan = off; SET clustervec.probes = 2; SET clustervec.gpu = off;};

my %metrics = (
	l2 => [ '<->', 'cvec_l2_distance' ],
	ip => [ '<#>', 'cvec_negative_inner_product' ],
	cosine => [ '<=>', 'cvec_cosine_distance' ]);

# each query's 10 nearest as id:distance; $filter adds the query's label
sub answers
{
	my ($table, $metric, $filter) = @_;
	my ($op, $function) = @{ $metrics{$metric} };
	my ($qcol, $distance) =
	  $table eq 'tc' ? ('q.qc', "t.v $op q.qc") : ('q.qv', "$function(t.v, q.qv)");
	my $where = $filter ? 'WHERE t.c = q.c' : '';
	return sql(qq{$settings
SELECT string_agg(a, ' ' ORDER BY qid) FROM (
	SELECT q.qid, (SELECT string_agg(id || ':' || d, ',') FROM
		(SELECT id, $distance AS d FROM $table t $where ORDER BY t.v $op $qcol LIMIT 10) x) AS a
	FROM q) s});
}

# cvsearch through an index: per query, id:distance in rank order (the
# distance rounded to $digits, for the GPU)
sub batch
{
	my ($table, $index, $mode, $digits) = @_;
	my $queries_sql = $table eq 'tc' ? 'qc' : 'qv::cvec';
	my $distance = $digits ? "round(r.distance::numeric, $digits)" : 'r.distance';
	return sql(qq{SET clustervec.gpu = $mode;
SELECT string_agg(concat_ws(':', r.query_no, r.rank, t.id, $distance), ',' ORDER BY r.query_no, r.rank)
FROM cvsearch('$index', (SELECT array_agg($queries_sql ORDER BY qid) FROM q), 10, 2) r
JOIN $table t ON t.ctid = r.tid});
}

sub plan_of
{
	my ($metric, $filter) = @_;
	my $op = $metrics{$metric}[0];
	my $where = $filter ? 'WHERE t.c = 7' : '';
	return sql(qq{$settings EXPLAIN (COSTS OFF)
SELECT id FROM tv t $where ORDER BY t.v $op (SELECT qv FROM q LIMIT 1) LIMIT 10});
}

for my $am ('cvivf', 'cvlattice')
{
	for my $metric (sort keys %metrics)
	{
		my $with = $am eq 'cvivf' ? 'WITH (lists = 20, seed = 3)' : '';
		my $key = $am eq 'cvivf' ? '' : ', c';
		sql(qq{
CREATE INDEX tc_idx ON tc USING $am (v cvec_${metric}_ops$key) $with;
CREATE INDEX tv_idx ON tv USING $am (v vector_${metric}_ops$key) $with;
});
		like(plan_of($metric), qr/Index Scan using tv_idx on tv/,
			"$am $metric: ORDER BY v $metrics{$metric}[0] q uses the index on the vector column");
		my $want = answers('tc', $metric);
		like($want, qr/^(\d+:[-0-9.e]+,){9}\d+:[-0-9.e]+ /, "$am $metric: 10 rows per query");
		is(answers('tv', $metric), $want,
			"$am $metric: the vector index answers as the cvec index (rows, order, distances)");
		is(batch('tv', 'tv_idx', 'off'), batch('tc', 'tc_idx', 'off'),
			"$am $metric: cvsearch over the vector index answers as over the cvec index");
		if ($am eq 'cvlattice')
		{
			like(plan_of($metric, 1), qr/Index Cond: \(c = 7\)/,
				"$am $metric: the label condition is an index condition");
			is(answers('tv', $metric, 1), answers('tc', $metric, 1),
				"$am $metric: label-filtered answers equal the cvec index's");
		}
		sql('DROP INDEX tc_idx; DROP INDEX tv_idx;');
	}
}

sql(q{CREATE INDEX tv_default ON tv USING cvivf (v) WITH (lists = 20, seed = 3);
	  CREATE INDEX tc_default ON tc USING cvivf (v) WITH (lists = 20, seed = 3)});
is(sql(q{SELECT opcname FROM pg_opclass o JOIN pg_index i ON i.indclass[0] = o.oid
	WHERE i.indexrelid = 'tv_default'::regclass}),
	'vector_l2_ops', 'vector_l2_ops is the default class of vector under cvivf');
is(sql(q{SELECT recall FROM cvivf_recall('tv_default', 20, 10, 2, 1)}),
	sql(q{SELECT recall FROM cvivf_recall('tc_default', 20, 10, 2, 1)}),
	'cvivf_recall of the vector index equals the cvec index\'s');
sql(q{CREATE INDEX tv_ivfflat ON tv USING ivfflat (v vector_l2_ops) WITH (lists = 10)});
like(sql(q{SET enable_seqscan = off; EXPLAIN (COSTS OFF)
	SELECT id FROM tv ORDER BY v <-> '[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]' LIMIT 1}),
	qr/Index Scan using tv_(default|ivfflat)/,
	'pgvector\'s own vector_l2_ops (ivfflat) lives beside ours');
sql(q{DROP INDEX tv_ivfflat; DROP INDEX tv_default; DROP INDEX tc_default});

# ---------------------------------------------------------------- functions
sub health
{
	my ($table) = @_;
	return sql(qq{SET clustervec.gpu = off;
SELECT string_agg(h::text, E'\\n' ORDER BY cluster) FROM cluster_health('$table', 'c', 'v') h});
}
my $health = health('tc');
like($health, qr/^\(0,200,/, 'cluster_health over the cvec table');
is(health('tv'), $health, 'cluster_health over the vector column equals it over the cvec copy');
is(sql(q{SET clustervec.gpu = off; SELECT string_agg(h::text, E'\n' ORDER BY cluster)
	FROM cluster_health_query('SELECT c, v FROM tv ORDER BY id') h}),
	sql(q{SET clustervec.gpu = off; SELECT string_agg(h::text, E'\n' ORDER BY cluster)
	FROM cluster_health_query('SELECT c, v FROM tc ORDER BY id') h}),
	'cluster_health_query over vectors equals it over cvec');
is(sql(q{SELECT string_agg(c || ' ' || s::text, E'\n' ORDER BY c) FROM
	(SELECT c, cluster_stats(v) AS s FROM tv GROUP BY c) x}),
	sql(q{SELECT string_agg(c || ' ' || s::text, E'\n' ORDER BY c) FROM
	(SELECT c, cluster_stats(v) AS s FROM tc GROUP BY c) x}),
	'cluster_stats(vector) equals cluster_stats(cvec)');
is(sql(q{SELECT string_agg(concat_ws(':', query_no, rank, tid, distance), ',' ORDER BY query_no, rank)
	FROM cvsearch_exact('tv', 'v', (SELECT array_agg(qv::cvec ORDER BY qid) FROM q), 5)}),
	sql(q{SELECT string_agg(concat_ws(':', query_no, rank, tid, distance), ',' ORDER BY query_no, rank)
	FROM cvsearch_exact('tc', 'v', (SELECT array_agg(qc ORDER BY qid) FROM q), 5)}),
	'cvsearch_exact over the vector column equals it over cvec');
like((cv_try_sql($node, q{SELECT * FROM cluster_health('tv', 'c', 'id')}))[2],
	qr/must be of type cvec, not bigint/, 'a column of another type is still refused');

# ---------------------------------------------------------------- NaN and infinity
# pgvector before 0.4.4 stored them from binary input; a binary cast from
# bytea makes such a value here (dimensions 3, unused 0, then 1, NaN, 2).
sql(q{CREATE CAST (bytea AS vector) WITHOUT FUNCTION;
CREATE FUNCTION old_vector(text) RETURNS vector LANGUAGE sql IMMUTABLE
	AS $$ SELECT decode('0300' || '0000' || '0000803f' || $1 || '00000040', 'hex')::vector $$;
CREATE TABLE bad (id int, c int, v vector(3));
INSERT INTO bad VALUES (1, 1, '[1,2,3]'), (2, 1, old_vector('0000c07f'));});
is(sql(q{SELECT v::text FROM bad WHERE id = 2}), '[1,NaN,2]', 'a stored NaN as old pgvector left it');

sub refused
{
	my ($sql, $pattern, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my ($rc, $out, $err) = cv_try_sql($node, $sql);
	like($err, $pattern, $name);
	return;
}
my $nan = qr/ERROR:  NaN not allowed in cvec/;
refused(q{SELECT v::cvec FROM bad}, $nan, 'the cast to cvec refuses NaN');
refused(q{SELECT old_vector('0000807f')::cvec}, qr/ERROR:  infinite value not allowed in cvec/,
	'the cast to cvec refuses infinity');
refused(q{SELECT decode('0300' || '0100' || '0000803f' || '0000803f' || '00000040', 'hex')::vector::cvec},
	qr/ERROR:  value is not laid out as a cvec/, 'the cast checks the unused field');
refused(q{SELECT decode('0300', 'hex')::vector::cvec},
	qr/ERROR:  value is not laid out as a cvec/, 'the cast checks there is a header');
refused(q{SELECT decode('0000' || '0000', 'hex')::vector::cvec},
	qr/ERROR:  cvec must have at least 1 dimension/, 'the cast checks the dimensions');
refused(q{CREATE INDEX ON bad USING cvivf (v) WITH (lists = 1)}, $nan, 'a cvivf build refuses NaN');
refused(q{CREATE INDEX ON bad USING cvlattice (v, c)}, $nan, 'a cvlattice build refuses NaN');
refused(q{SELECT * FROM cluster_health('bad', 'c', 'v')}, $nan, 'cluster_health refuses NaN');
refused(q{SELECT cluster_stats(v) FROM bad}, $nan, 'cluster_stats refuses NaN');
refused(q{SELECT * FROM cvsearch_exact('bad', 'v', ARRAY['[1,1,1]'::cvec], 1)}, $nan,
	'cvsearch_exact refuses NaN');
sql(q{DELETE FROM bad WHERE id = 2;
	CREATE INDEX bad_ivf ON bad USING cvivf (v) WITH (lists = 1);
	CREATE INDEX bad_lat ON bad USING cvlattice (v, c);});
refused(q{INSERT INTO bad VALUES (3, 1, old_vector('0000c07f'))}, $nan,
	'inserts into the indexes refuse NaN');
refused(q{SET enable_seqscan = off; SELECT id FROM bad ORDER BY v <-> old_vector('0000c07f') LIMIT 1},
	$nan, 'an index scan refuses a NaN query');
is(sql(q{SELECT count(*) FROM bad}), '1', 'and nothing was added');

# ---------------------------------------------------------------- GPU paths
ok(defined cv_wait_for($node, "SELECT worker_state FROM clustervec_gpu_info()", 'ready', 60),
	'the worker is ready');

sub info { return sql("SELECT $_[0] FROM clustervec_gpu_info()"); }

# GPU answers compared rounded, as in 104_gpu_paths.pl (a real GPU may differ
# from the CPU in the last digits)
my $gpu_health = q{SET clustervec.gpu = require;
SELECT string_agg(concat_ws(' ', cluster, n, round(centroid_norm::numeric, 6),
                            round(inertia::numeric, 3), nearest_cluster), E'\n' ORDER BY cluster)
FROM cluster_health('%s', 'c', 'v')};
my $runs0 = info('health_runs');
is(sql(sprintf($gpu_health, 'tv')), sql(sprintf($gpu_health, 'tc')),
	'cluster_health on the GPU: the vector column equals the cvec copy');
cmp_ok(info('health_runs'), '>=', $runs0 + 2, 'the GPU served both');

my $builds0 = info('index_builds');
sql(q{SET clustervec.gpu = require;
CREATE INDEX tv_gpu ON tv USING cvivf (v vector_l2_ops) WITH (lists = 20, seed = 3);});
cmp_ok(info('index_builds'), '>', $builds0, 'the GPU served the build');
is(sql(q{SELECT count(*) || ' ' || sum(tuples) FROM cvivf_lists('tv_gpu')}), '20 4001',
	'the GPU-built vector index holds every non-NULL row in 20 lists');
cv_verify_ok($node, 'tv_gpu', 'the GPU-built vector index verifies');

is(sql(q{SET clustervec.gpu = require; SELECT clustervec_gpu_warm('tv_gpu')}), 't',
	'the vector index is mirrored');
my $searches0 = info('searches');
my $gpu = batch('tv', 'tv_gpu', 'require', 9);
is($gpu, batch('tv', 'tv_gpu', 'off', 9), 'cvsearch over the mirror of the vector index equals the CPU path');
my $scan = sub {
	my ($mode) = @_;
	return sql(qq{$settings SET clustervec.gpu = $mode; SET clustervec.probes = 2;
SELECT string_agg(a, ' ' ORDER BY qid) FROM (
	SELECT q.qid, (SELECT string_agg(id::text, ',') FROM
		(SELECT id FROM tv t ORDER BY t.v <-> q.qv LIMIT 10) x) AS a FROM q) s});
};
is($scan->('require'), $scan->('off'), 'index scans over the mirror of the vector index equal the CPU scans');
cmp_ok(info('searches'), '>', $searches0, 'the GPU served the searches');
like(sql(q{SET clustervec.gpu = require; SET enable_seqscan = off;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT id FROM tv ORDER BY v <-> (SELECT qv FROM q WHERE qid = 1) LIMIT 10}),
	qr/clustervec: 1 index scan on the GPU worker/, 'EXPLAIN ANALYZE says the GPU served the scan');

done_testing();
