
# Dump and restore.  A database holding every clustervec type (cvec, cvec(n)
# columns, arrays of cvec and of cvec(n), a domain over cvec(3), the
# extension's composite types), every aggregate's results and states stored
# in tables (avg, sum, cluster_stats, user aggregates over the support
# functions, cluster_health's rows), a view and a materialized view, and
# every index kind (cvivf with each opclass, a partial and an expression
# cvivf index, one on the materialized view, btree cvec_ops, cvlattice in
# both column orders, one partial) is dumped as
# plain SQL, custom and directory format, and restored into fresh databases
# (the plain one on the same server, the others on a second server, the
# directory one with two parallel jobs).  Each restored database must equal
# the source: the same columns and index definitions, every row (count and
# text form), every index valid and verified by cvivf_verify or
# cvlattice_verify, the same lists
# (same data, same order, same seed: the same centroids), the same answers
# to ORDER BY <op> LIMIT through each index (all lists probed and the
# default probes), and final functions over the stored states give the
# stored results.
#
# Before the dump, the hostile values of issue 11 are refused with a data
# exception (SQLSTATE class 22): aggregate support functions called on bad
# states, NaN and infinite elements, and aggregates whose states are bad;
# none of them can be stored.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $source = cv_new_node('dump_source');
my $target = cv_new_node('dump_target');
my $db = 'vecs';

$source->safe_psql('postgres', "CREATE DATABASE $db");
cv_install_helpers($source, $db);

sub sql
{
	my ($node, $dbname, $sql) = @_;
	return $node->safe_psql($dbname, $sql, timeout => 300);
}

# ---------------------------------------------------------------- the data
sql(
	$source, $db, q{
SELECT setseed(0.42);
CREATE DOMAIN unit3 AS cvec(3) CHECK (abs(vector_norm(VALUE) - 1) < 1e-5);
CREATE TABLE items (
	id int PRIMARY KEY,
	grp int NOT NULL,
	v cvec(8),				-- typmod
	free cvec,				-- no typmod: 1 to 7 elements, 1e-10 .. 1e10
	pair cvec(2)[],			-- array of cvec(n)
	list cvec[],			-- array of cvec: mixed dimensions, NULL elements, 2-D
	unit unit3				-- domain over cvec(3)
);
INSERT INTO items
SELECT i, i % 12,
	CASE WHEN i % 97 = 0 THEN NULL ELSE cv_point(i % 12, 8, 1.5) END,
	CASE WHEN i % 5 = 0 THEN NULL ELSE
		(SELECT array_agg(((random() - 0.5) * 10 ^ (floor(random() * 21) - 10))::real)
		 FROM generate_series(0, i % 7) j)::cvec END,
	ARRAY[ARRAY[i, -i]::cvec, ARRAY[random(), random()]::cvec]::cvec(2)[],
	CASE i % 4
		WHEN 0 THEN ARRAY[ARRAY[random()]::cvec, NULL, ARRAY[1, 2, i]::cvec]
		WHEN 1 THEN ARRAY[[ARRAY[i]::cvec, ARRAY[0]::cvec], [ARRAY[-i]::cvec, NULL]]
		WHEN 2 THEN '{}'::cvec[]
		ELSE NULL END,
	l2_normalize(ARRAY[1 + random(), random(), -random()]::cvec)::unit3
FROM generate_series(1, 3000) i;
-- the extremes of float4: largest, smallest normal, smallest subnormal, -0
INSERT INTO items (id, grp, v, free, pair) VALUES
	(3001, 0, '[3.4028235e38,-3.4028235e38,1.1754944e-38,1e-45,-0,0,1,-1]',
	 '[1e-45,-1e-45,-0]', '{"[3.4028235e38,-0]"}'),
	(3002, 1, '[1,1,1,1,1,1,1,1]', '[0]', NULL);
ANALYZE items;

CREATE AGGREGATE cvec_state(cvec) (
	SFUNC = cvec_accum, STYPE = float8[], INITCOND = '{0}', COMBINEFUNC = cvec_combine);
CREATE AGGREGATE stats_state(cvec) (
	SFUNC = cluster_stats_accum, STYPE = float8[], COMBINEFUNC = cluster_stats_combine);

-- aggregate results and states, stored (without the extremes row, whose
-- sums sit at the float4 limit)
CREATE TABLE group_stats AS
	SELECT grp, count(v) AS n, avg(v) AS mean, sum(v) AS total, cluster_stats(v) AS stats,
	       avg(unit::cvec) AS unit_mean
	FROM items WHERE id <= 3000 GROUP BY grp;
CREATE TABLE group_stats_flat AS
	SELECT grp, (s).* FROM (SELECT grp, cluster_stats(v) AS s FROM items WHERE id <= 3000 GROUP BY grp) g;
CREATE TABLE group_states AS
	SELECT grp, cvec_state(v) AS sum_state, stats_state(v) AS stats_state
	FROM items WHERE id <= 3000 GROUP BY grp;
CREATE TABLE whole AS
	SELECT avg(v) AS mean, sum(v) AS total, cluster_stats(v) AS stats,
	       cvec_state(v) AS sum_state, stats_state(v) AS stats_state
	FROM items WHERE id <= 3000;
CREATE TABLE health AS SELECT * FROM cluster_health('items', 'grp', 'v');
CREATE TABLE health_summary AS SELECT * FROM cluster_health_summary('items', 'grp', 'v');

CREATE VIEW near_origin AS SELECT id, v <-> '[0,0,0,0,0,0,0,0]' AS d FROM items;
CREATE MATERIALIZED VIEW normed AS SELECT id, l2_normalize(v) AS u FROM items WHERE id <= 3000;

-- every index kind, with reloptions
CREATE INDEX items_l2 ON items USING cvivf (v cvec_l2_ops) WITH (lists = 12, seed = 7);
CREATE INDEX items_ip ON items USING cvivf (v cvec_ip_ops) WITH (lists = 6, seed = 7, sample_rows = 2000);
CREATE INDEX items_cos ON items USING cvivf (v cvec_cosine_ops) WITH (lists = 6, iterations = 5, seed = 7);
CREATE INDEX items_part ON items USING cvivf (v) WITH (lists = 4, seed = 7) WHERE grp < 4;
CREATE INDEX items_expr ON items USING cvivf (l2_normalize(v) cvec_ip_ops) WITH (lists = 4, seed = 7);
CREATE INDEX items_btree ON items USING btree (v cvec_ops);
CREATE INDEX items_lattice ON items USING cvlattice (v, grp);
-- partial: the unfiltered cosine queries keep to items_cos
CREATE INDEX items_lattice_cos ON items USING cvlattice (grp, v cvec_cosine_ops) WHERE grp < 6;
CREATE INDEX normed_cos ON normed USING cvivf (u cvec_cosine_ops) WITH (lists = 5, seed = 7);
});

# ---------------------------------------------------------------- hostile values
# (rc, SQLSTATE or '') of one statement
sub sqlstate_of
{
	my ($node, $dbname, $statement) = @_;
	my ($stdout, $stderr);
	my $rc = $node->psql($dbname, "\\set VERBOSITY sqlstate\n$statement",
		stdout => \$stdout, stderr => \$stderr);
	return $stderr =~ /ERROR:\s+([0-9A-Z]{5})/ ? $1 : "none (rc $rc)";
}

my @hostile = (
	# support functions on bad states, and results that are not finite
	q{SELECT cvec_sum('{1,NaN,0}')},
	q{SELECT cvec_sum('{1,Infinity,0}')},
	q{SELECT cvec_avg('{1e-320,1,1}')},
	q{SELECT cvec_avg('{-1,5}')},
	q{SELECT cvec_avg('{0.5,5}')},
	q{SELECT cvec_avg('{NaN,5}')},
	q{SELECT cvec_avg('{1,1e300}')},
	q{SELECT cvec_combine('{0}', '{NaN,1}')},
	q{SELECT cvec_combine('{1,1}', '{1,1,2}')},
	q{SELECT cvec_accum('{Infinity,1}', '[1]')},
	q{SELECT cluster_stats_final('{NaN}')},
	q{SELECT cluster_stats_final('{Infinity}')},
	q{SELECT cluster_stats_final('{-1}')},
	q{SELECT cluster_stats_final('{2.5,1,0,0,0,0,1,1,1,1}')},
	q{SELECT cluster_stats_final('{3,1,0,0,0,0,1,1}')},
	q{SELECT cluster_stats_final('{1,1,0,0,0,0,NaN,1}')},
	q{SELECT cluster_stats_final('{1,1,0,0,0,0,1e300,1}')},
	q{SELECT cluster_stats_combine('{NaN}', '{1,1,0,0,0,0,1,1}')},
	q{SELECT cluster_stats_accum('{NaN}', '[1]')},
	# elements that are not finite float4 values
	q{SELECT '[NaN]'::cvec},
	q{SELECT '[1,Infinity]'::cvec},
	q{SELECT '[1e39]'::cvec},
	q{SELECT ARRAY['NaN']::real[]::cvec},
	q{SELECT ARRAY[1e300]::float8[]::cvec},
	q{SELECT '[3e38]'::cvec + '[3e38]'},
	q{SELECT '{"[1,NaN]"}'::cvec[]},
);
for my $statement (@hostile)
{
	like(sqlstate_of($source, $db, $statement), qr/^22/, "$statement: a data exception");
}

# none can be stored, directly or through an aggregate
my @stores = (
	q{INSERT INTO items (id, grp, v) SELECT 9001, 0, cvec_avg('{1e-320,1,1,1,1,1,1,1,1}')},
	q{INSERT INTO items (id, grp, v) SELECT 9002, 0, cvec_sum('{1,NaN,0,0,0,0,0,0,0}')},
	q{INSERT INTO items (id, grp, v) SELECT 9003, 0, cvec_avg('{-1,5,5,5,5,5,5,5,5}')},
	q{INSERT INTO items (id, grp, free) VALUES (9004, 0, '[NaN]')},
	q{INSERT INTO items (id, grp, list) VALUES (9005, 0, '{"[Infinity]"}')},
	q{INSERT INTO group_stats (grp, stats) SELECT -1, cluster_stats_final('{1,1,0,0,0,0,NaN,1}')},
	q{INSERT INTO group_stats (grp, mean) SELECT -2, cvec_avg('{NaN,5}')},
	q{UPDATE items SET v = v * '[3e38,3e38,3e38,3e38,3e38,3e38,3e38,3e38]' WHERE id = 3001},
);
for my $statement (@stores)
{
	like(sqlstate_of($source, $db, $statement), qr/^22/, "$statement: refused");
}
sql(
	$source, $db, q{
CREATE AGGREGATE hostile_avg(cvec) (
	SFUNC = cvec_accum, STYPE = float8[], FINALFUNC = cvec_avg, INITCOND = '{1e-320,1}');
CREATE AGGREGATE hostile_stats(cvec) (
	SFUNC = cluster_stats_accum, STYPE = float8[], FINALFUNC = cluster_stats_final,
	INITCOND = '{NaN}');
});
like(sqlstate_of($source, $db, q{INSERT INTO group_stats (grp, mean) SELECT -3, hostile_avg(ARRAY[1]::cvec) FROM items WHERE false}),
	qr/^22/, 'an aggregate with a bad initial state and no rows stores nothing');
like(sqlstate_of($source, $db, q{INSERT INTO group_stats (grp, stats) SELECT -4, hostile_stats(v) FROM items}),
	qr/^22/, 'an aggregate with a bad initial state over rows stores nothing');
sql($source, $db, 'DROP AGGREGATE hostile_avg(cvec); DROP AGGREGATE hostile_stats(cvec)');
is(sql($source, $db, q{SELECT (SELECT count(*) FROM items WHERE id > 3002) + (SELECT count(*) FROM group_stats WHERE grp < 0)}),
	'0', 'no hostile row was stored');
is(sql($source, $db, q{SELECT v FROM items WHERE id = 3001}),
	'[3.4028235e+38,-3.4028235e+38,1.1754944e-38,1e-45,-0,0,1,-1]', 'the extremes row is intact');

# ---------------------------------------------------------------- fingerprint
my @tables = qw(items group_stats group_stats_flat group_states whole health health_summary normed near_origin);
my @cvivf = qw(items_l2 items_ip items_cos items_part items_expr normed_cos);
my @lattice = qw(items_lattice items_lattice_cos);
my %queries = map { $_ => sql($source, $db, "SELECT v FROM items WHERE id = $_") } (1, 777, 2024);

# name => [index, query text]: the rows an ORDER BY ... LIMIT reads through each index
sub knn_queries
{
	my %q;
	for my $id (sort keys %queries)
	{
		my $qv = "'$queries{$id}'::cvec";
		$q{"l2 q$id"} = ['items_l2', "SELECT id, v <-> $qv AS d FROM items ORDER BY v <-> $qv LIMIT 15"];
		$q{"ip q$id"} = ['items_ip', "SELECT id, v <#> $qv AS d FROM items ORDER BY v <#> $qv LIMIT 15"];
		$q{"cos q$id"} = ['items_cos', "SELECT id, v <=> $qv AS d FROM items ORDER BY v <=> $qv LIMIT 15"];
		$q{"part q$id"} = ['items_part',
			"SELECT id, v <-> $qv AS d FROM items WHERE grp < 4 ORDER BY v <-> $qv LIMIT 15"];
		$q{"expr q$id"} = ['items_expr',
			"SELECT id, l2_normalize(v) <#> l2_normalize($qv) AS d FROM items ORDER BY l2_normalize(v) <#> l2_normalize($qv) LIMIT 15"];
		$q{"matview q$id"} = ['normed_cos',
			"SELECT id, u <=> $qv AS d FROM normed ORDER BY u <=> $qv LIMIT 15"];
		$q{"lattice q$id"} = ['items_lattice',
			"SELECT id, v <-> $qv AS d FROM items WHERE grp = 2 ORDER BY v <-> $qv LIMIT 15"];
		$q{"lattice any q$id"} = ['items_lattice_cos',
			"SELECT id, v <=> $qv AS d FROM items WHERE grp = ANY('{1,3}') ORDER BY v <=> $qv LIMIT 15"];
	}
	$q{'btree'} = ['items_btree', 'SELECT id, 0 AS d FROM items WHERE v IS NOT NULL ORDER BY v LIMIT 25'];
	return %q;
}

sub fingerprint
{
	my ($node, $dbname) = @_;
	my %f;

	$f{extension} = sql($node, $dbname, q{SELECT extversion FROM pg_extension WHERE extname = 'clustervec'});
	$f{columns} = sql(
		$node, $dbname, q{
SELECT string_agg(c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod), E'\n'
                  ORDER BY c.relname, a.attnum)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_attribute a ON a.attrelid = c.oid
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'v', 'm') AND a.attnum > 0 AND NOT a.attisdropped});
	$f{indexes} = sql(
		$node, $dbname, q{
SELECT string_agg(pg_get_indexdef(i.indexrelid), E'\n' ORDER BY pg_get_indexdef(i.indexrelid))
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public'});
	$f{domain} = sql($node, $dbname,
		q{SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE contypid = 'unit3'::regtype});
	for my $t (@tables)
	{
		$f{"rows $t"} = sql($node, $dbname,
			"SELECT count(*) || ' ' || md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), '')) FROM $t t");
	}
	for my $i (@cvivf)
	{
		$f{"lists $i"} = sql($node, $dbname,
			"SELECT string_agg(list || ':' || tuples || ':' || coalesce(centroid_norm::text, '-'), ' ' ORDER BY list) FROM cvivf_lists('$i')");
	}
	for my $i (@lattice)
	{
		$f{"lists $i"} = sql($node, $dbname,
			"SELECT string_agg(list || ':' || coalesce(label, 'NULL') || ':' || members || ':' || coalesce(centroid::text, '-'), ' ' ORDER BY list) FROM cvlattice_lists('$i')");
	}
	my %knn = knn_queries();
	for my $name (sort keys %knn)
	{
		my ($index, $query) = @{ $knn{$name} };
		my $settings = 'SET enable_seqscan = off; SET enable_bitmapscan = off; SET enable_sort = off;';
		my $lists = $index =~ /lattice/ ? 'cvlattice_lists' : 'cvivf_lists';
		my $all = $index eq 'items_btree' ? '' :
		  "SET clustervec.probes = " . sql($node, $dbname, "SELECT count(*) FROM $lists('$index')") . ';';
		$f{"plan $name"} = sql($node, $dbname, "$settings EXPLAIN (COSTS OFF) $query") =~ /Index Scan using $index / ? $index : 'other plan';
		$f{"knn $name"} = sql($node, $dbname,
			"$settings SELECT string_agg(id || ':' || d, ' ' ORDER BY d, id) FROM ($query) s");
		$f{"knn all lists $name"} = sql($node, $dbname,
			"$settings $all SELECT string_agg(id || ':' || d, ' ' ORDER BY d, id) FROM ($query) s");
	}
	# the final functions over the stored states give the stored results
	$f{finals} = sql(
		$node, $dbname, q{
SELECT bool_and(cvec_avg(s.sum_state)::text = g.mean::text
                AND cvec_sum(s.sum_state)::text = g.total::text
                AND cluster_stats_final(s.stats_state)::text = g.stats::text)
FROM group_states s JOIN group_stats g USING (grp)});
	$f{'finals whole'} = sql($node, $dbname,
		q{SELECT cvec_avg(sum_state)::text = mean::text AND cluster_stats_final(stats_state)::text = stats::text FROM whole});
	return \%f;
}

my $want = fingerprint($source, $db);
is($want->{finals} . $want->{'finals whole'}, 'tt', 'source: the final functions over the stored states give the stored results');
is(scalar(grep { /^plan / && $want->{$_} eq 'other plan' } keys %$want), 0,
	'source: every ORDER BY ... LIMIT query scans its index');
for my $i (@cvivf)
{
	cv_verify_ok($source, $i, "source: cvivf_verify($i)", $db);
}
for my $i (@lattice)
{
	is(sql($source, $db, "SELECT count(*) FROM (SELECT cvlattice_verify('$i')) v"), '1', "source: cvlattice_verify($i)");
}

# ---------------------------------------------------------------- dump, restore, compare
my $dir = PostgreSQL::Test::Utils::tempdir();

sub restored_ok
{
	my ($node, $dbname, $how) = @_;
	my $got = fingerprint($node, $dbname);

	is(sql($node, $dbname,
			q{SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
			  JOIN pg_namespace n ON n.oid = c.relnamespace
			  WHERE n.nspname = 'public' AND NOT (i.indisvalid AND i.indisready AND i.indislive)}),
		'0', "$how: every index valid");
	for my $i (@cvivf)
	{
		cv_verify_ok($node, $i, "$how: cvivf_verify($i)", $dbname);
	}
	for my $i (@lattice)
	{
		is(sql($node, $dbname, "SELECT count(*) FROM (SELECT cvlattice_verify('$i')) v"), '1', "$how: cvlattice_verify($i)");
	}
	for my $key (sort keys %$want)
	{
		is($got->{$key}, $want->{$key}, "$how: $key");
	}
	return;
}

# plain SQL, restored by psql on the same server
command_ok([ 'pg_dump', '-f', "$dir/plain.sql", '-d', $source->connstr($db) ], 'pg_dump, plain');
$source->safe_psql('postgres', 'CREATE DATABASE restored_plain');
command_ok(
	[
		'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $source->connstr('restored_plain'),
		'-f', "$dir/plain.sql"
	],
	'psql restores the plain dump');
restored_ok($source, 'restored_plain', 'plain');

# custom format, restored by pg_restore on another server
command_ok([ 'pg_dump', '-Fc', '-f', "$dir/custom.dump", '-d', $source->connstr($db) ],
	'pg_dump, custom format');
$target->safe_psql('postgres', 'CREATE DATABASE restored_custom');
command_ok(
	[ 'pg_restore', '--exit-on-error', '-d', $target->connstr('restored_custom'), "$dir/custom.dump" ],
	'pg_restore of the custom dump');
restored_ok($target, 'restored_custom', 'custom');

# directory format, dumped and restored with two jobs
command_ok([ 'pg_dump', '-Fd', '-j', '2', '-f', "$dir/directory", '-d', $source->connstr($db) ],
	'pg_dump, directory format, 2 jobs');
$target->safe_psql('postgres', 'CREATE DATABASE restored_directory');
command_ok(
	[
		'pg_restore', '--exit-on-error', '-j', '2', '-d', $target->connstr('restored_directory'),
		"$dir/directory"
	],
	'pg_restore of the directory dump, 2 jobs');
restored_ok($target, 'restored_directory', 'directory');

$source->stop;
$target->stop;
done_testing();
