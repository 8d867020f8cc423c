
# cvlattice (issue 12, CPU): recall@10 of unfiltered search at probes 1, 2
# and 4 against exact search; label-filtered answers equal exact search
# within the label; after inserts (new labels too), deletes and VACUUM
# every centroid equals its members' mean (avg() per label, float64); a
# streaming standby answers exactly as the primary and keeps the same label
# -> list map; an immediate stop during inserts that make new labels loses
# no committed row and moves no label to another list; concurrent sessions
# making the same new labels make one list each; cvlattice_verify reports a
# centroid damaged on disk.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $dims = 32;
my $queries = 30;

my $primary = cv_new_node('lattice', allows_streaming => 1);
$primary->append_conf('postgresql.conf', "autovacuum = off\nshared_buffers = 4MB\n");
$primary->restart;
$primary->backup('lattice_backup');
my $standby = PostgreSQL::Test::Cluster->new('lattice_standby');
$standby->init_from_backup($primary, 'lattice_backup', has_streaming => 1);
$standby->start;

# 50 overlapping clusters: probes = 1 does not find every neighbour
cv_load_clustered($primary, 't', rows => 6000, dims => $dims, sigma => 6.0, seed => 0.3);
$primary->safe_psql(
	'postgres', qq{
CREATE INDEX t_lat ON t USING cvlattice (v cvec_l2_ops, c);
CREATE TABLE q (qid int PRIMARY KEY, c int, v cvec($dims));
SELECT setseed(0.8);
INSERT INTO q SELECT i, (i * 7 % 50), cv_point((i * 7 % 50)::int, $dims, 6.0)
	FROM generate_series(1, $queries) i;
});

is($primary->safe_psql('postgres', 'SELECT count(*) FROM cvlattice_lists($$t_lat$$)'),
	50, 'one list per label');

# --- recall@10 of unfiltered search against exact search --------------------

# the 10th smallest distance of each query without any index (ties count),
# over the whole table and within the query's label; recomputed after changes
sub refresh_exact
{
	$primary->safe_psql(
		'postgres', q{
SET enable_indexscan = off;
SET enable_bitmapscan = off;
DROP TABLE IF EXISTS exact;
CREATE TABLE exact AS SELECT q.qid,
	(SELECT max(d) FROM (SELECT t.v <-> q.v AS d FROM t ORDER BY 1 LIMIT 10) x) AS kth,
	(SELECT max(d) FROM (SELECT t.v <-> q.v AS d FROM t WHERE t.c = q.c ORDER BY 1 LIMIT 10) x)
		AS kth_in_label
	FROM q;
});
	return;
}
refresh_exact();

my $settings = q{
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SET clustervec.iterative_scan = off;
};

like(
	$primary->safe_psql(
		'postgres', "$settings EXPLAIN (COSTS OFF)
SELECT (SELECT count(*) FROM (SELECT t.v <-> q.v AS d FROM t ORDER BY t.v <-> q.v LIMIT 10) x)
FROM q"),
	qr/Index Scan using t_lat on t/,
	'the unfiltered queries scan the lattice index');

sub recall
{
	my ($node, $probes) = @_;
	return $node->safe_psql(
		'postgres', "$settings SET clustervec.probes = $probes;
SELECT round(avg(hits) / 10, 4) FROM (
	SELECT (SELECT count(*) FROM (SELECT t.v <-> q.v AS d FROM t ORDER BY t.v <-> q.v LIMIT 10) x
	        WHERE x.d <= e.kth) AS hits
	FROM q JOIN exact e USING (qid)) r");
}

my %recall = map { $_ => recall($primary, $_) } (1, 2, 4);
note("recall\@10: probes 1: $recall{1}, 2: $recall{2}, 4: $recall{4}");
cmp_ok($recall{1}, '>=', 0.5, 'recall@10 at probes = 1 is at least 0.5');
cmp_ok($recall{2}, '>=', $recall{1}, 'probes = 2 finds at least what probes = 1 finds');
cmp_ok($recall{4}, '>=', $recall{2}, 'probes = 4 finds at least what probes = 2 finds');
cmp_ok($recall{4}, '>=', 0.9, 'recall@10 at probes = 4 is at least 0.9');
is(recall($primary, 50), '1.0000', 'probing every list is exact');

# --- label-filtered: exact within the label ---------------------------------

sub filtered_ok
{
	my ($node, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	like(
		$node->safe_psql(
			'postgres', "$settings SET clustervec.probes = 1; EXPLAIN (COSTS OFF)
SELECT id FROM t WHERE c = 7 ORDER BY v <-> (SELECT v FROM q LIMIT 1) LIMIT 10"),
		qr/Index Cond: \(c = 7\)/,
		"$name: the label condition is an index condition");
	# every query: 10 rows, all of its label, none farther than the exact 10th
	is( $node->safe_psql(
			'postgres', "$settings SET clustervec.probes = 1;
SELECT count(*) FROM q JOIN exact e USING (qid),
	LATERAL (SELECT count(*) AS n, bool_and(x.c = q.c) AS same_label,
	                bool_and(x.d <= e.kth_in_label) AS within
	         FROM (SELECT t.c, t.v <-> q.v AS d FROM t WHERE t.c = q.c
	               ORDER BY t.v <-> q.v LIMIT 10) x) r
WHERE r.n = 10 AND r.same_label AND r.within"),
		$queries,
		"$name: each label-filtered top 10 at probes = 1 is the exact one within the label");
	return;
}
filtered_ok($primary, 'after the build');

# --- inserts, new labels, deletes, VACUUM: centroids stay the means ----------

# the largest distance between a list's centroid and avg() of its label's rows
sub centroid_error
{
	my ($node) = @_;
	return $node->safe_psql(
		'postgres', q{
SELECT (count(*) = (SELECT count(DISTINCT c) + max((c IS NULL)::int) FROM t WHERE v IS NOT NULL))::text
       || ' ' || (max(l.centroid <-> a.mean) < 1e-4)::text
FROM cvlattice_lists('t_lat') l
JOIN (SELECT c::text AS label, count(*) AS n, avg(v) AS mean FROM t WHERE v IS NOT NULL GROUP BY c) a
	ON l.label IS NOT DISTINCT FROM a.label AND l.members = a.n});
}

$primary->safe_psql(
	'postgres', qq{
SELECT setseed(0.9);
INSERT INTO t (id, c, v) SELECT i, CASE WHEN i % 10 = 0 THEN NULL ELSE i % 53 END,
	cv_point((i % 53)::int, $dims, 6.0) FROM generate_series(100001, 100800) i;
});
is(centroid_error($primary), 'true true',
	'after inserts (3 new labels and NULL labels) every centroid is its label\'s mean');
cv_lattice_verify_ok($primary, 'after inserts');
$primary->safe_psql('postgres', 'DELETE FROM t WHERE id % 4 = 1; VACUUM t;');
is(centroid_error($primary), 'true true',
	'after deletes and VACUUM every centroid is its label\'s mean');
cv_lattice_verify_ok($primary, 'after VACUUM');
is($primary->safe_psql('postgres',
		"SELECT sum(inserted_since_build) FROM cvlattice_lists('t_lat')"),
	800, 'inserted_since_build counts the inserted rows');

# --- the standby answers the same --------------------------------------------

sub answers
{
	my ($node) = @_;
	return $node->safe_psql(
		'postgres', "$settings SET clustervec.probes = 2;
SELECT string_agg(ids, ' ' ORDER BY qid) FROM (
	SELECT q.qid, (SELECT string_agg(id::text, ',') FROM
		(SELECT id FROM t ORDER BY t.v <-> q.v LIMIT 10) x) ||
	       '/' || (SELECT string_agg(id::text, ',') FROM
		(SELECT id FROM t WHERE t.c = q.c ORDER BY t.v <-> q.v LIMIT 10) x) AS ids
	FROM q) s");
}

sub lists_of
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(list || ':' || coalesce(label, 'NULL') || ':' || members || ':' || "
		  . "coalesce(centroid::text, '-'), ' ' ORDER BY list) FROM cvlattice_lists('t_lat')");
}

refresh_exact();
filtered_ok($primary, 'after inserts, deletes and VACUUM');
$primary->wait_for_catchup($standby);
is(lists_of($standby), lists_of($primary),
	'the standby has the same lists, labels, counts and centroids');
is(answers($standby), answers($primary), 'the standby answers every query as the primary');
cv_lattice_verify_ok($standby, 'on the standby');
filtered_ok($standby, 'on the standby');

# --- an immediate stop while inserts make new labels ---------------------------

my %before = map { split /=/ } split /\n/,
  $primary->safe_psql('postgres',
	"SELECT coalesce(label, 'NULL') || '=' || list FROM cvlattice_lists('t_lat')");
my $inserter = cv_start_psql(
	$primary, qq{DO \$\$
BEGIN
	FOR i IN 0 .. 999999 LOOP
		INSERT INTO t (id, c, v) SELECT 200000 + i, 1000 + i % 400,
			cv_keyed_point((i % 50)::int, $dims, 6.0, 200000 + i);
		COMMIT;
	END LOOP;
END
\$\$;});
$primary->poll_query_until('postgres', 'SELECT count(*) >= 300 FROM t WHERE id >= 200000')
  or die 'the inserter made no progress';
$primary->stop('immediate');
my ($rc) = cv_finish_psql($inserter);
isnt($rc, 0, 'the inserter was cut by the crash');
$primary->start;

my ($committed, $reachable) = split /\|/, $primary->safe_psql(
	'postgres', q{
SET enable_seqscan = off; SET enable_bitmapscan = off;
SET clustervec.probes = 32768; SET clustervec.iterative_scan = off;
SELECT (SELECT count(*) FROM t WHERE v IS NOT NULL),
       (SELECT count(*) FROM (SELECT id FROM t ORDER BY v <-> (SELECT v FROM q LIMIT 1)) s)});
is($reachable, $committed, "after the crash every committed row ($committed) is in the index");
cmp_ok($primary->safe_psql('postgres', 'SELECT count(*) FROM t WHERE id >= 200000'),
	'>=', 300, 'rows committed before the crash survived');
my %after = map { split /=/ } split /\n/,
  $primary->safe_psql('postgres',
	"SELECT coalesce(label, 'NULL') || '=' || list FROM cvlattice_lists('t_lat')");
is(scalar(grep { ($after{$_} // -1) != $before{$_} } keys %before), 0,
	'after the crash every label keeps its list');
is( $primary->safe_psql('postgres',
		"SELECT count(*) FROM (SELECT label FROM cvlattice_lists('t_lat') GROUP BY label HAVING count(*) > 1) d"),
	0, 'after the crash no label has two lists');
is(centroid_error($primary), 'true true', 'after the crash every centroid is its label\'s mean');
cv_lattice_verify_ok($primary, 'after the crash');
# new labels after recovery go on numbering after the recovered ones
$primary->safe_psql('postgres',
	"INSERT INTO t (id, c, v) SELECT 300000, 5000, v FROM q LIMIT 1");
is( $primary->safe_psql('postgres',
		"SELECT list = (SELECT count(*) - 1 FROM cvlattice_lists('t_lat')) FROM cvlattice_lists('t_lat') WHERE label = '5000'"),
	't', 'a label new after the crash takes the next list');
$primary->wait_for_catchup($standby);
is(lists_of($standby), lists_of($primary), 'the standby followed the crash recovery');

# --- concurrent sessions making the same new labels ---------------------------

my @sessions = map {
	cv_start_psql(
		$primary, qq{DO \$\$
BEGIN
	FOR i IN 0 .. 299 LOOP
		INSERT INTO t (id, c, v) SELECT 400000 + $_ * 1000 + i, 6000 + i % 150,
			cv_keyed_point((i % 50)::int, $dims, 6.0, 400000 + $_ * 1000 + i);
		COMMIT;
	END LOOP;
END
\$\$;})
} (1 .. 3);
for my $session (@sessions)
{
	my ($rc, $out, $err) = cv_finish_psql($session);
	is($rc, 0, "a concurrent inserter finished$err");
}
is( $primary->safe_psql('postgres',
		"SELECT count(*) FROM cvlattice_lists('t_lat') WHERE label::int >= 6000"),
	150, 'three sessions inserting the same 150 new labels made 150 lists');
is(centroid_error($primary), 'true true',
	'after concurrent inserts every centroid is its label\'s mean');
cv_lattice_verify_ok($primary, 'after concurrent inserts');

# --- cvlattice_verify finds a centroid that is not its list's mean -------------

$primary->safe_psql(
	'postgres', q{
CREATE TABLE damaged (c int, v cvec(4));
INSERT INTO damaged SELECT i % 3, ARRAY[i, 1, 2, 3]::real[]::cvec FROM generate_series(1, 30) i;
CREATE INDEX damaged_idx ON damaged USING cvlattice (v, c);
CHECKPOINT;
});
my $file = $primary->data_dir . '/'
  . $primary->safe_psql('postgres', "SELECT pg_relation_filepath('damaged_idx')");
is($primary->safe_psql('postgres', "SELECT count(*) FROM (SELECT cvlattice_verify('damaged_idx')) v"),
	1, 'cvlattice_verify passes before the damage');
$primary->stop;
# the build packs the centroids from block 1; list 0's first element is the
# first float of that page's contents (after the 24-byte page header)
open(my $fh, '+<', $file) or die "open $file: $!";
binmode $fh;
seek($fh, 8192 + 24, 0) or die "seek: $!";
print $fh pack('f<', 12345.0);
close($fh) or die "close: $!";
$primary->start;
my (undef, undef, $damage_error) = $primary->psql('postgres', "SELECT cvlattice_verify('damaged_idx')");
like($damage_error, qr/Invariant violated: every centroid is the mean of its list's live members/,
	'cvlattice_verify reports a centroid that is not the mean of its list');

sub cv_lattice_verify_ok
{
	my ($node, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my ($rc, $out, $err) = $node->psql('postgres', "SELECT cvlattice_verify('t_lat')");
	is($rc . ($err eq '' ? '' : ": $err"), '0', "cvlattice_verify $name");
	return;
}

done_testing();
