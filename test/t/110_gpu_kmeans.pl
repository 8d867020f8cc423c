
# kmeans() and kmeans_centroids() through the GPU worker against the CPU
# path (clustervec.gpu = off), from the same seed, for every metric.  In CI
# the worker opens clustervec_cuda_cpu (src/math behind the library API):
# seeding, Lloyd and the final assignment are then bit for bit the CPU's,
# so the assignments must be equal.  CV_GPU_LIBRARY=clustervec_cuda runs
# the same file on the H200, where the assignment ranks in FP32 (bf16 under
# clustervec.gpu_assign = bf16) and Lloyd's sums are reduced in another
# order: rows may change cluster on near ties, so there at most 0.5% of the
# rows may differ and the inertia must be within 1%.
#
# Also: the NOTICE says where it ran; a statement_timeout stops a long
# CPU run within about a second.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $real_gpu = cv_gpu_library() eq 'clustervec_cuda';
my $node = cv_gpu_node('gpu_kmeans', qq{
max_worker_processes = 16
});

sub sql { return cv_sql($node, $_[0], 300); }

ok(defined cv_wait_for($node, "SELECT worker_state FROM clustervec_gpu_info()", 'ready', 60),
	'the worker is ready');

cv_load_clustered($node, 'items', rows => 20000, dims => 32, centres => 64, sigma => 1.5);
sql(q{UPDATE items SET v = NULL WHERE id % 1000 = 0});

foreach my $metric (qw(l2 cosine ip))
{
	my $call = "FROM kmeans('items', 'v', 64, iterations => 10, seed => 5, metric => '$metric')";
	my $centroids = "FROM kmeans_centroids('items', 'v', 64, iterations => 10, seed => 5, metric => '$metric')";

	sql("SET clustervec.gpu = off; CREATE TABLE cpu_$metric AS SELECT * $call");
	my ($rc, $out, $err) = cv_try_sql($node,
		"SET clustervec.gpu = require; CREATE TABLE gpu_$metric AS SELECT * $call");
	is($rc, 0, "$metric: kmeans under clustervec.gpu = require runs");
	like($err, qr/k-means of 19980 rows into 64 clusters on the GPU/,
		"$metric: the GPU worker served it (NOTICE)");
	like($err, qr/skipped 20 rows whose vector is NULL/, "$metric: NULL rows counted");

	my $differ = sql("SELECT count(*) FROM cpu_$metric c FULL JOIN gpu_$metric g USING (tid)
		WHERE c.cluster IS DISTINCT FROM g.cluster");
	if ($real_gpu)
	{
		cmp_ok($differ, '<=', 100, "$metric: at most 0.5% of rows change cluster ($differ)");
	}
	else
	{
		is($differ, '0', "$metric: the same assignment as the CPU path");
	}

	# inertia: the l2 one is the sum of distance^2, the others of distances
	my $energy = $metric eq 'l2' ? 'distance ^ 2' : 'distance';
	my $cpu = sql("SELECT sum($energy) FROM cpu_$metric");
	my $gpu = sql("SELECT sum($energy) FROM gpu_$metric");
	my $scale = abs($cpu) > 0 ? abs($cpu) : 1;
	cmp_ok(abs($gpu - $cpu) / $scale, '<=', $real_gpu ? 0.01 : 1e-12,
		"$metric: inertia GPU $gpu, CPU $cpu");

	# kmeans_centroids on the worker: its inertia is the sum over kmeans' rows
	my $c_gpu = sql("SET clustervec.gpu = require; SET client_min_messages = warning;
		SELECT sum(inertia) || ' ' || sum(members) || ' ' || count(*) $centroids");
	my ($c_inertia, $c_members, $c_count) = split / /, $c_gpu;
	cmp_ok(abs($c_inertia - $gpu) / $scale, '<=', 1e-9,
		"$metric: kmeans_centroids' inertia $c_inertia is kmeans' $gpu");
	is("$c_members $c_count", '19980 64', "$metric: 64 clusters hold every row");
}

# the centroids of the two paths (l2): equal on the CPU library, close on a GPU
my $far = sql(q{SET client_min_messages = warning;
	CREATE TEMP TABLE cc AS SELECT * FROM kmeans_centroids('items', 'v', 64, seed => 5);
	SET clustervec.gpu = require;
	CREATE TEMP TABLE gc AS SELECT * FROM kmeans_centroids('items', 'v', 64, seed => 5);
	SELECT max(cc.centroid <-> gc.centroid) FROM cc JOIN gc USING (cluster)});
cmp_ok($far, '<=', $real_gpu ? 0.05 : 0, "l2 centroids: largest GPU-CPU gap $far");

# a long CPU run stops for a cancel: k-means++ seeding alone of 6,000
# centres over 60,000 rows is 1.2e10 multiply-adds, and so is each Lloyd
# iteration (10 rows a centre converge slowly): seconds on any machine,
# so the timeout comes before the run could end
sql(q{CREATE TABLE noise AS SELECT i AS id,
	(SELECT array_agg(random()::real) FROM generate_series(1, 32) WHERE i > 0)::cvec AS v
	FROM generate_series(1, 60000) i});
my $t0 = time;
my ($rc, $out, $err) = cv_try_sql($node,
	q{SET clustervec.gpu = off; SET statement_timeout = '300ms'; SET client_min_messages = warning;
	  SELECT count(*) FROM kmeans('noise', 'v', 6000, iterations => 10000)});
my $took = time - $t0;
like($err, qr/canceling statement due to statement timeout/, 'statement_timeout ends kmeans');
cmp_ok($took, '<', 4, sprintf('within a second of the timeout (%.1f s)', $took));

$node->stop;
done_testing();
