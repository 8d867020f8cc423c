
# clustervec_gpu_mirrors() lists only the mirrors a caller may know of: of
# its own database, of indexes whose table it may SELECT from unfiltered by
# row-level security (a mirror's size tells the index's row count).  The
# other functions' privileges are checked in sql/privileges.sql; this one
# needs the worker, so a preloaded node.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = cv_gpu_node('gpu_mirror_privileges');

sub sql
{
	my ($sql, $dbname) = @_;
	return $node->safe_psql($dbname // 'postgres', $sql, timeout => 120);
}

ok(defined cv_wait_for($node, "SELECT worker_state FROM clustervec_gpu_info()", 'ready', 60),
	'the worker is ready');

sql(q{
CREATE TABLE secret (id int, v cvec(4));
INSERT INTO secret SELECT i, ARRAY[i % 3, i % 5, i % 7, i % 11] FROM generate_series(1, 2000) i;
CREATE INDEX secret_idx ON secret USING cvivf (v) WITH (lists = 4);
CREATE ROLE nobody;
CREATE ROLE reader;
GRANT SELECT ON secret TO reader;
});
is(sql(q{SET clustervec.gpu = require; SELECT clustervec_gpu_warm('secret_idx')}), 't',
	'the owner mirrors the index');

my $listed = q{SELECT coalesce(string_agg(index::text, ','), '') FROM clustervec_gpu_mirrors()};
is(sql($listed), 'secret_idx', 'the owner sees the mirror');
is(sql("SET ROLE nobody; $listed"), '', 'a role without SELECT on the table does not');
is(sql("SET ROLE reader; $listed"), 'secret_idx', 'a role with SELECT does');

sql(q{
ALTER TABLE secret ENABLE ROW LEVEL SECURITY;
CREATE POLICY few ON secret FOR SELECT USING (id < 10);
});
is(sql("SET ROLE reader; $listed"), '', 'nor a role the table\'s row-level security applies to');
is(sql($listed), 'secret_idx', 'the owner, whom the policies do not apply to, still does');

# another database: the OIDs of this one mean nothing there
sql('CREATE DATABASE other');
sql('CREATE EXTENSION clustervec', 'other');
is(sql($listed, 'other'), '', 'a superuser in another database sees no mirror of this one');
is(sql(q{SELECT mirrors FROM clustervec_gpu_info()}, 'other'), '1',
	'while clustervec_gpu_info still counts it');

$node->stop;
done_testing();
