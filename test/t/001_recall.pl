
# cvivf search quality and behaviour on clustered data: recall@10 against
# exact brute force for each operator class, the planner's choice of the
# index, rows inserted after the build, filtered queries with and without
# iterative scans, deterministic builds, and VACUUM.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $rows = 12000;
my $dims = 32;
my $lists = 100;
my $queries = 50;
my $sigma = 6.0;    # clusters overlap: probes = 1 finds about 70%

my $node = cv_new_node('recall');
cv_load_clustered($node, 't', rows => $rows, dims => $dims, sigma => $sigma,
	seed => 0.125);

# queries: fresh points of the same clusters (different noise)
$node->safe_psql(
	'postgres', qq{
CREATE TABLE q (qid int PRIMARY KEY, v cvec($dims));
SELECT setseed(0.75);
INSERT INTO q SELECT i, cv_point((i * 7 % 50)::int, $dims, $sigma)
	FROM generate_series(1, $queries) i;
});

my %opclass = (
	l2 => '<->',
	ip => '<#>',
	cosine => '<=>',);

for my $metric (qw(l2 ip cosine))
{
	my $op = $opclass{$metric};
	my $index = "t_${metric}_idx";

	$node->safe_psql('postgres',
		"CREATE INDEX $index ON t USING cvivf (v cvec_${metric}_ops) WITH (lists = $lists, seed = 7)"
	);
	cv_verify_ok($node, $index, "cvivf_verify after the $metric build");
	is(cv_lists_count($node, $index), $lists, "$metric index has $lists lists");
	is(cv_lists_sum($node, $index), $rows, "$metric index lists hold every row");

	# exact: the 10th smallest distance of each query, without any index
	$node->safe_psql(
		'postgres', qq{
SET enable_indexscan = off;
SET enable_bitmapscan = off;
CREATE TABLE exact_$metric AS
	SELECT q.qid, (SELECT max(d) FROM (SELECT t.v $op q.v AS d FROM t ORDER BY 1 LIMIT 10) x) AS kth
	FROM q;
});

	my $approx = qq{
SELECT q.qid, e.kth, r.id, r.d, r.rn
FROM q JOIN exact_$metric e USING (qid)
CROSS JOIN LATERAL (
	SELECT t.id, t.v $op q.v AS d, row_number() OVER () AS rn
	FROM (SELECT id, v FROM t ORDER BY v $op q.v LIMIT 10) t) r};
	my $settings = qq{
SET enable_seqscan = off;
SET clustervec.probes = 10;
SET clustervec.iterative_scan = relaxed_order;
};
	my $plan =
	  $node->safe_psql('postgres', "$settings EXPLAIN (COSTS OFF) $approx");
	like($plan, qr/Index Scan using $index on t/,
		"$metric: the per-query subplan scans the index");

	my $summary = $node->safe_psql(
		'postgres', qq{$settings
WITH a AS ($approx),
     per_query AS (
	SELECT qid, count(*) AS n, count(DISTINCT id) AS n_distinct,
	       count(*) FILTER (WHERE d <= kth + 1e-9) AS hits,
	       bool_and(d >= coalesce(prev, '-Infinity')) AS ordered
	FROM (SELECT *, lag(d) OVER (PARTITION BY qid ORDER BY rn) AS prev FROM a) s
	GROUP BY qid)
SELECT count(*), sum(n), min(n_distinct), sum(hits), bool_and(ordered) FROM per_query;
});
	my ($nq, $returned, $min_distinct, $hits, $ordered) = split /\|/,
	  $summary;
	is($nq, $queries, "$metric: every query returned rows");
	is($returned, 10 * $queries, "$metric: every query returned 10 rows");
	is($min_distinct, 10, "$metric: no row returned twice");
	is($ordered, 't', "$metric: rows come in non-decreasing distance");
	my $recall = $hits / (10 * $queries);
	note sprintf("%s recall\@10 at probes = 10: %.4f", $metric, $recall);
	cmp_ok($recall, '>=', 0.95, "$metric: recall\@10 >= 0.95 at probes = 10");

	# more probes, better recall: all lists is exact
	my $all_hits = $node->safe_psql(
		'postgres', qq{
SET enable_seqscan = off;
SET clustervec.probes = $lists;
WITH a AS ($approx) SELECT count(*) FILTER (WHERE d <= kth + 1e-9) FROM a;
});
	is($all_hits, 10 * $queries, "$metric: probing every list is exact");

	# only the l2 index stays for the tests below
	$node->safe_psql('postgres', "DROP INDEX $index") if $metric ne 'l2';
}

# The planner picks the index for ORDER BY v <-> q LIMIT 10 on its own.
my $qvec = $node->safe_psql('postgres', 'SELECT v FROM q WHERE qid = 1');
like(
	$node->safe_psql(
		'postgres',
		"EXPLAIN (COSTS OFF) SELECT id FROM t ORDER BY v <-> '$qvec' LIMIT 10"),
	qr/Index Scan using t_l2_idx on t/,
	'EXPLAIN shows an index scan for ORDER BY v <-> q LIMIT 10');

# Rows inserted after the build are found: 30 rows around a point far
# from every centre (the centres lie in [-10, 10]^d).
my $far = cv_vector_sql($dims, 100);
$node->safe_psql(
	'postgres', qq{
SELECT setseed(0.5);
INSERT INTO t (id, c, v)
	SELECT 1000000 + i, -1, (SELECT array_agg((100 + random() - 0.5)::real) FROM generate_series(1, $dims) WHERE i > 0)::cvec
	FROM generate_series(1, 30) i;
});
is(
	$node->safe_psql(
		'postgres', qq{
SET enable_seqscan = off;
SET clustervec.probes = 1;
SET clustervec.iterative_scan = off;
SELECT string_agg(id::text, ',' ORDER BY id) FROM (SELECT id FROM t ORDER BY v <-> $far LIMIT 10) s;
}),
	$node->safe_psql(
		'postgres', qq{
SET enable_indexscan = off;
SELECT string_agg(id::text, ',' ORDER BY id) FROM (SELECT id FROM t ORDER BY v <-> $far LIMIT 10) s;
}),
	'rows inserted after the build are found by a one-probe index scan');
is(
	$node->safe_psql(
		'postgres', qq{
SET enable_seqscan = off;
SET clustervec.probes = 1;
SET clustervec.iterative_scan = off;
SELECT count(*) FROM (SELECT id FROM t ORDER BY v <-> $far LIMIT 30) s WHERE id > 1000000;
}),
	30,
	'all 30 new rows are in one list, the one nearest to them');
cv_verify_ok($node, 't_l2_idx', 'cvivf_verify after inserts');
is(cv_lists_sum($node, 't_l2_idx'), $rows + 30, 'lists count the inserted rows');

# Filtered queries.  Rows with id % 10 = 0 belong to centres 0, 10, 20, 30
# and 40 only; a query near centre 5 finds none of them in its nearest list.
my $q5 = $node->safe_psql('postgres',
	"SELECT cv_keyed_point(5, $dims, 2.0, 42)");
my $filtered =
  "SELECT count(*) FROM (SELECT id FROM t WHERE id % 10 = 0 ORDER BY v <-> '$q5' LIMIT 10) s";
my $filtered_rows = $node->safe_psql(
	'postgres', qq{
SET enable_seqscan = off;
SET clustervec.probes = 1;
SET clustervec.iterative_scan = relaxed_order;
$filtered;
});
is($filtered_rows, 10,
	'filtered query with probes = 1 and iterative_scan = relaxed_order returns 10 rows');
my $filtered_ids = $node->safe_psql(
	'postgres', qq{
SET enable_seqscan = off;
SET clustervec.probes = 1;
SET clustervec.iterative_scan = relaxed_order;
SELECT count(*) FILTER (WHERE id % 10 = 0) FROM (SELECT id FROM t WHERE id % 10 = 0 ORDER BY v <-> '$q5' LIMIT 10) s;
});
is($filtered_ids, 10, 'every row of the filtered query passes the filter');
my $filtered_off = $node->safe_psql(
	'postgres', qq{
SET enable_seqscan = off;
SET clustervec.probes = 1;
SET clustervec.iterative_scan = off;
$filtered;
});
cmp_ok($filtered_off, '<', 10,
	"filtered query with iterative_scan = off returns fewer rows ($filtered_off)");
my $filtered_capped = $node->safe_psql(
	'postgres', qq{
SET enable_seqscan = off;
SET clustervec.probes = 1;
SET clustervec.iterative_scan = relaxed_order;
SET clustervec.max_probes = 1;
$filtered;
});
is($filtered_capped, $filtered_off,
	'iterative scan stops at clustervec.max_probes lists');

# Determinism: the same data and seed build the same lists.
my $lists_of = sub {
	my ($index) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(list || ':' || tuples || ':' || centroid_norm, ' ' ORDER BY list) FROM cvivf_lists('$index')"
	);
};
$node->safe_psql('postgres',
	"CREATE INDEX t_l2_again ON t USING cvivf (v cvec_l2_ops) WITH (lists = $lists, seed = 7)"
);
$node->safe_psql('postgres',
	"CREATE INDEX t_l2_third ON t USING cvivf (v cvec_l2_ops) WITH (lists = $lists, seed = 7)"
);
my $first_build = $lists_of->('t_l2_again');
is($lists_of->('t_l2_third'), $first_build,
	'same seed twice: identical cvivf_lists output');
is(
	$node->safe_psql(
		'postgres',
		"SELECT count(*) FROM q WHERE cvivf_list_of('t_l2_again', v) <> cvivf_list_of('t_l2_third', v)"
	),
	0,
	'same seed twice: every query vector maps to the same list');
$node->safe_psql('postgres', 'DROP INDEX t_l2_again; DROP INDEX t_l2_third');

# VACUUM: delete a third of the rows; the index forgets them.
$node->safe_psql('postgres', 'DELETE FROM t WHERE id % 3 = 0; VACUUM (INDEX_CLEANUP ON) t;');
cv_verify_ok($node, 't_l2_idx', 'cvivf_verify after DELETE + VACUUM');
my $count = $node->safe_psql('postgres', 'SELECT count(*) FROM t');
is(cv_lists_sum($node, 't_l2_idx'), $count,
	'after VACUUM, cvivf_lists tuples sum to count(*)');
cv_reachable_ok($node, 't', 't_l2_idx', name => 'after VACUUM');
is(
	$node->safe_psql(
		'postgres', qq{
SET enable_seqscan = off;
SET clustervec.probes = $lists;
SELECT count(*) FROM (SELECT id FROM t ORDER BY v <-> '$qvec' LIMIT 100) s WHERE id % 3 = 0;
}),
	0,
	'deleted rows are not returned after VACUUM');

# Rows inserted after VACUUM (heap TIDs may be reused) are found.
$node->safe_psql(
	'postgres', qq{
SELECT setseed(0.3);
INSERT INTO t (id, c, v)
	SELECT 2000000 + i, i % 50, cv_point(i % 50, $dims, 2.0) FROM generate_series(1, 2000) i;
});
cv_verify_ok($node, 't_l2_idx', 'cvivf_verify after inserts into vacuumed pages');
is(cv_lists_sum($node, 't_l2_idx'),
	$node->safe_psql('postgres', 'SELECT count(*) FROM t'),
	'lists count every live row');
cv_reachable_ok($node, 't', 't_l2_idx', name => 'after VACUUM and inserts');

$node->stop;
done_testing();
