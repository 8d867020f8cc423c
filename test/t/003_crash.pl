
# Crash recovery of cvivf indexes: sessions insert rows in many small
# committed transactions while the server is stopped in immediate mode
# (no shutdown checkpoint: recovery replays the WAL).  After each restart
# every committed row, and only those, must be reachable through the index
# (every list probed), and cvivf_verify must pass.  One table has 6,000
# dimensions: a tuple longer than a page, appended in several WAL records
# (continuation pages first, then the record that links them).

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $wide = 6000;
my $node = cv_new_node('crash');
# few buffers: index pages are evicted (written before the crash) often
$node->append_conf('postgresql.conf', "shared_buffers = 2MB\nautovacuum = off\n");
$node->restart;

# s: small vectors; w: 6,000 dimensions; e: an index built on an empty
# table of untyped vectors (one list, dimensions learnt at the first insert)
cv_load_clustered($node, 's', rows => 2000, dims => 16, seed => 0.1);
cv_load_clustered($node, 'w', rows => 40, dims => $wide, centres => 4,
	seed => 0.2);
$node->safe_psql(
	'postgres', q{
CREATE INDEX s_v_idx ON s USING cvivf (v) WITH (lists = 20);
CREATE INDEX w_v_idx ON w USING cvivf (v) WITH (lists = 4, sample_rows = 40);
CREATE TABLE e (id bigint PRIMARY KEY, v cvec);
CREATE INDEX e_v_idx ON e USING cvivf (v cvec_cosine_ops);
});

my %tables = (
	s => { index => 's_v_idx', dims => 16, batch => 5, wait => 200 },
	w => { index => 'w_v_idx', dims => $wide, batch => 1, wait => 8 },
	e => { index => 'e_v_idx', dims => 16, batch => 3, wait => 100 },);

# An inserter: batches of known ids, one committed transaction each.
sub inserter_sql
{
	my ($table, $base) = @_;
	my $t = $tables{$table};
	my ($dims, $batch) = ($t->{dims}, $t->{batch});
	my $centres = $table eq 'w' ? 4 : 50;
	return qq{DO \$\$
BEGIN
	FOR i IN 0 .. 999999 LOOP
		INSERT INTO $table (id, v)
			SELECT $base + i * $batch + j,
			       cv_keyed_point((($base + i * $batch + j) % $centres)::int, $dims, 2.0, $base + i * $batch + j)
			FROM generate_series(1, $batch) j;
		COMMIT;
	END LOOP;
END
\$\$;};
}

sub check_table
{
	my ($table, $base, $label) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $t = $tables{$table};

	cv_verify_ok($node, $t->{index}, "$label: cvivf_verify($t->{index})");
	my $op = $table eq 'e' ? '<=>' : '<->';
	my $rows = cv_reachable_ok($node, $table, $t->{index}, op => $op,
		name => "$label: every committed row of $table in $t->{index}");

	# committed transactions are whole and in order: ids base+1 .. base+n
	my ($n, $max) = split /\|/,
	  $node->safe_psql('postgres',
		"SELECT count(*), coalesce(max(id), $base) - $base FROM $table WHERE id > $base");
	is($n, $max, "$label: the rows of $table are ids $base+1 .. $base+$n, no gap");
	is($n % $t->{batch}, 0, "$label: only whole transactions of $table ($n rows)");
	return $n;
}

for my $round (1 .. 3)
{
	my $base = $round * 1000000;
	my %handles;

	for my $table (sort keys %tables)
	{
		$handles{$table} =
		  cv_start_psql($node, inserter_sql($table, $base));
	}
	for my $table (sort keys %tables)
	{
		$node->poll_query_until('postgres',
			"SELECT count(*) >= $tables{$table}{wait} FROM $table WHERE id > $base")
		  or die "round $round: inserts into $table made no progress";
	}
	# round 2: a checkpoint in the middle, so replay starts among the inserts
	if ($round == 2)
	{
		$node->safe_psql('postgres', 'CHECKPOINT');
		$node->poll_query_until('postgres',
			"SELECT count(*) >= 2 * $tables{w}{wait} FROM w WHERE id > $base");
	}
	$node->stop('immediate');
	for my $table (sort keys %tables)
	{
		my ($rc, $out, $err) = cv_finish_psql($handles{$table});
		isnt($rc, 0, "round $round: the $table inserter was cut by the crash");
	}
	$node->start;

	for my $table (sort keys %tables)
	{
		my $n = check_table($table, $base, "round $round");
		cmp_ok($n, '>=', $tables{$table}{wait},
			"round $round: rows committed into $table before the crash survived");
	}

	# the recovered index takes more rows
	$node->safe_psql(
		'postgres', qq{
INSERT INTO s (id, v) SELECT $base + 900000 + j, cv_keyed_point(j % 50, 16, 2.0, $base + j) FROM generate_series(1, 100) j;
INSERT INTO w (id, v) SELECT $base + 900000 + j, cv_keyed_point(j % 4, $wide, 2.0, $base + j) FROM generate_series(1, 3) j;
INSERT INTO e (id, v) SELECT $base + 900000 + j, cv_keyed_point(j % 50, 16, 2.0, $base + j) FROM generate_series(1, 30) j;
});
	for my $table (sort keys %tables)
	{
		cv_verify_ok($node, $tables{$table}{index},
			"round $round: cvivf_verify($tables{$table}{index}) after inserts into the recovered index"
		);
		cv_reachable_ok($node, $table, $tables{$table}{index},
			op => $table eq 'e' ? '<=>' : '<->',
			name => "round $round: rows inserted after recovery into $table");
	}
}

# VACUUM after the crashes removes the rows of the interrupted transactions
# (their index tuples were written, their heap rows are dead): then the
# lists count exactly the table's rows.
$node->safe_psql('postgres', qq{
VACUUM (INDEX_CLEANUP ON) s;
VACUUM (INDEX_CLEANUP ON) w;
VACUUM (INDEX_CLEANUP ON) e;
});
for my $table (sort keys %tables)
{
	my $index = $tables{$table}{index};
	cv_verify_ok($node, $index, "after VACUUM: cvivf_verify($index)");
	is(cv_lists_sum($node, $index),
		$node->safe_psql('postgres', "SELECT count(*) FROM $table"),
		"after VACUUM: $index lists count the rows of $table");
}

# delete a third, VACUUM, and crash right after: recovery keeps the counts
$node->safe_psql('postgres', qq{
DELETE FROM s WHERE id % 3 = 0;
DELETE FROM w WHERE id % 3 = 0;
VACUUM (INDEX_CLEANUP ON) s;
VACUUM (INDEX_CLEANUP ON) w;
});
$node->stop('immediate');
$node->start;
for my $table (qw(s w))
{
	my $index = $tables{$table}{index};
	cv_verify_ok($node, $index, "VACUUM, crash: cvivf_verify($index)");
	is(cv_lists_sum($node, $index),
		$node->safe_psql('postgres', "SELECT count(*) FROM $table"),
		"VACUUM, crash: $index lists count the rows of $table");
	cv_reachable_ok($node, $table, $index,
		name => "VACUUM, crash: rows of $table reachable");
}

$node->stop;
done_testing();
