
# The README's pg_cron recipes (issue 15, item 4) under the real pg_cron
# (Debian's postgresql-15-cron): a cluster_health snapshot into a history
# table, a weekly REINDEX INDEX CONCURRENTLY, the conditional retrain (one
# statement: cvivf_retrain where cvivf_health says retrain) and the
# conditional rebuild (a check job that turns a REINDEX INDEX CONCURRENTLY
# job on when cvivf_health says rebuild and off when not).  Each job's outcome is read
# from cron.job_run_details and its effect checked: the history grew with the
# summary of cluster_health_summary, the rebuilt indexes have new
# relfilenodes and fresh baselines, and a REINDEX that fails (a role whose
# maintenance_work_mem cannot hold the build) leaves the index valid and its
# answers exact.  Skipped where pg_cron is not installed.
#
# pg_cron before 1.5 schedules by the minute, so the jobs run every minute
# ('* * * * *'; from 1.5 on every 5 seconds), and the check and the rebuild
# it gates at even and odd minutes, as the README's run at 03:00 and 03:30:
# the test takes three to five minutes.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('cron');
$node->init;
$node->start;
if ($node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_cron'}) eq '0')
{
	plan skip_all => 'pg_cron is not installed (Debian: postgresql-15-cron)';
}
# pg_cron connects to the node's socket as the job's user to run each job
$node->append_conf('postgresql.conf', sprintf(q{
shared_preload_libraries = 'pg_cron'
cron.database_name = 'postgres'
cron.host = '%s'
max_parallel_workers_per_gather = 0
maintenance_work_mem = 64MB
autovacuum = off
}, $node->host));
$node->restart;
cv_install_helpers($node);

sub sql { return cv_sql($node, $_[0], 300); }

sql(q{CREATE EXTENSION pg_cron});
my $version = sql(q{SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'});
my ($major, $minor) = $version =~ /^(\d+)\.(\d+)/;
my $every = ($major > 1 || $minor >= 5) ? '5 seconds' : '* * * * *';
note "pg_cron $version: jobs run every '$every'";
my $wait = $every eq '5 seconds' ? 60 : 200;

my $dims = 16;
cv_load_clustered($node, 'items', rows => 3000, dims => $dims, centres => 12, sigma => 2.0);
cv_load_clustered($node, 'drifted', rows => 3000, dims => $dims, centres => 12, sigma => 2.0,
	seed => 0.5);
sql(q{
CREATE INDEX items_idx ON items USING cvivf (v) WITH (lists = 12, seed = 3);
CREATE INDEX drifted_idx ON drifted USING cvivf (v) WITH (lists = 12, seed = 3);
});
# rows far from every centroid: half as many again as the build had
cv_load_clustered($node, 'drifted', rows => 1500, dims => $dims, centres => 12, sigma => 9.0,
	seed => 0.7, first_id => 100001, no_create => 1);
is(sql(q{SELECT recommendation FROM cvivf_health('drifted_idx')}), 'retrain',
	'the drifted index needs new centroids before any job runs');
is(sql(q{SELECT recommendation FROM cvivf_health('items_idx')}), 'ok', 'the other does not');
# an index built before its rows: one list, no centroid, so it needs a rebuild
sql(qq{CREATE TABLE late (id bigint PRIMARY KEY, c int, v cvec($dims));
	CREATE INDEX late_idx ON late USING cvivf (v) WITH (lists = 12, seed = 3)});
cv_load_clustered($node, 'late', rows => 2000, dims => $dims, centres => 12, sigma => 2.0,
	seed => 0.6, no_create => 1);
is(sql(q{SELECT recommendation FROM cvivf_health('late_idx')}), 'rebuild',
	'the index built on an empty table needs a rebuild');

# The recipes, as the README gives them (jobs every $every instead of nightly and weekly).
sql(q{
CREATE TABLE cluster_health_history AS
SELECT now() AS taken_at,
	s.k AS summary_k, s.n AS summary_n, s.davies_bouldin AS summary_davies_bouldin,
	s.calinski_harabasz AS summary_calinski_harabasz, s.cohesion AS summary_cohesion,
	s.centroid_silhouette AS summary_centroid_silhouette, h.*
FROM cluster_health_summary('items', 'c', 'v') s, cluster_health('items', 'c', 'v') h
WITH NO DATA;
});
sql(qq{
SELECT cron.schedule('clustervec-health-items', '$every', \$job\$
INSERT INTO cluster_health_history
SELECT now(), s.k, s.n, s.davies_bouldin, s.calinski_harabasz, s.cohesion,
	s.centroid_silhouette, h.*
FROM cluster_health_summary('items', 'c', 'v', progress => false) s,
	cluster_health('items', 'c', 'v', progress => false) h
\$job\$);
SELECT cron.schedule('clustervec-reindex-items', '$every',
	'REINDEX INDEX CONCURRENTLY items_idx');
SELECT cron.schedule('clustervec-retrain-drifted', '$every', \$job\$
SELECT cvivf_retrain('drifted_idx') FROM cvivf_health('drifted_idx')
WHERE recommendation = 'retrain'
\$job\$);
SELECT cron.schedule('clustervec-rebuild-late', '1-59/2 * * * *',
	'REINDEX INDEX CONCURRENTLY late_idx');
SELECT cron.alter_job(jobid, active => false) FROM cron.job
	WHERE jobname = 'clustervec-rebuild-late';
SELECT cron.schedule('clustervec-check-late', '*/2 * * * *', \$job\$
SELECT cron.alter_job(j.jobid, active => h.recommendation = 'rebuild')
FROM cron.job j, cvivf_health('late_idx') h
WHERE j.jobname = 'clustervec-rebuild-late'
\$job\$);
});

# A REINDEX that fails: its role's maintenance_work_mem cannot hold the build.
cv_load_clustered($node, 'small', rows => 1500, dims => 64, centres => 1500, sigma => 1.0,
	seed => 0.3);
sql(q{
CREATE INDEX small_idx ON small USING cvivf (v) WITH (lists = 1000, iterations = 2);
CREATE ROLE cv_rebuilder LOGIN;
ALTER TABLE small OWNER TO cv_rebuilder;
ALTER ROLE cv_rebuilder SET maintenance_work_mem = '1MB';
});
sql(qq{SELECT cron.schedule_in_database('clustervec-reindex-small', '$every',
	'REINDEX INDEX CONCURRENTLY small_idx', 'postgres', 'cv_rebuilder')});

my %filenode = map { $_ => sql(qq{SELECT pg_relation_filenode('$_')}) }
  qw(items_idx drifted_idx small_idx late_idx);

# "status count" of a job's runs
sub runs
{
	my ($job, $status) = @_;
	return qq{SELECT count(*) > 0 FROM cron.job_run_details d JOIN cron.job j USING (jobid)
		WHERE j.jobname = '$job' AND d.status = '$status'};
}

ok(defined cv_wait_for($node, runs('clustervec-health-items', 'succeeded'), 't', $wait),
	'the snapshot job succeeded');
ok(defined cv_wait_for($node, runs('clustervec-reindex-items', 'succeeded'), 't', $wait),
	'the REINDEX INDEX CONCURRENTLY job succeeded');
ok(defined cv_wait_for($node, runs('clustervec-reindex-small', 'failed'), 't', $wait),
	'the REINDEX under too little memory failed');

# the weekly REINDEX: a new relfilenode, a fresh baseline, the same answers
isnt(sql(q{SELECT pg_relation_filenode('items_idx')}), $filenode{items_idx},
	'REINDEX CONCURRENTLY gave items_idx a new relfilenode');
sql(q{SELECT cron.unschedule('clustervec-reindex-items')});
is(sql(q{SELECT inserted_since_build || ' ' || deleted_since_build || ' ' || recommendation
		FROM cvivf_health('items_idx')}), '0 0 ok', 'the rebuilt index has a fresh baseline');
cv_verify_ok($node, 'items_idx');

# the snapshot: one row per cluster with the summary of cluster_health_summary
is(sql(q{SELECT count(*) = count(DISTINCT c.cluster) * count(DISTINCT c.taken_at)
		AND count(DISTINCT c.cluster) = (SELECT count(DISTINCT c) FROM items)
		FROM cluster_health_history c}), 't', 'each snapshot holds every cluster once');
is(sql(q{SELECT bool_and(h.summary_k = s.k AND h.summary_n = s.n
			AND abs(h.summary_davies_bouldin - s.davies_bouldin) <= 1e-12 * s.davies_bouldin
			AND abs(h.summary_centroid_silhouette - s.centroid_silhouette) <= 1e-12)
		FROM cluster_health_history h, cluster_health_summary('items', 'c', 'v') s}), 't',
	'the history holds the summary of cluster_health_summary');
is(sql(q{SELECT bool_and(h.n = m.n) FROM cluster_health_history h
		JOIN (SELECT c, count(*) AS n FROM items GROUP BY c) m ON m.c = h.cluster}), 't',
	'and each cluster\'s members');
my $snapshots = sql(q{SELECT count(DISTINCT taken_at) FROM cluster_health_history});
ok(defined cv_wait_for($node,
		qq{SELECT count(DISTINCT taken_at) > $snapshots FROM cluster_health_history}, 't', $wait),
	'the history grows with each run');

# the failed REINDEX: the index is still valid, used, and exact
like(sql(q{SELECT return_message FROM cron.job_run_details d JOIN cron.job j USING (jobid)
		WHERE j.jobname = 'clustervec-reindex-small' AND d.status = 'failed' LIMIT 1}),
	qr/maintenance_work_mem/, 'its failure names maintenance_work_mem');
sql(q{SELECT cron.unschedule(jobid) FROM cron.job WHERE jobname = 'clustervec-reindex-small'});
is(sql(q{SELECT pg_relation_filenode('small_idx')}), $filenode{small_idx},
	'the failed REINDEX left the index in place');
is(sql(q{SELECT indisvalid FROM pg_index WHERE indexrelid = 'small_idx'::regclass}), 't',
	'and valid');
cv_verify_ok($node, 'small_idx');
my $exact = sql(q{SET clustervec.probes = 1000; SET enable_seqscan = off;
	EXPLAIN (COSTS OFF) SELECT id FROM small ORDER BY v <-> (SELECT v FROM small WHERE id = 7) LIMIT 5});
like($exact, qr/Index Scan using small_idx/, 'queries still use it');
is(sql(q{SET clustervec.probes = 1000; SET enable_seqscan = off;
		SELECT string_agg(id::text, ',') FROM (SELECT id FROM small
			ORDER BY v <-> (SELECT v FROM small WHERE id = 7) LIMIT 5) a}),
	sql(q{SET enable_indexscan = off; SELECT string_agg(id::text, ',') FROM (SELECT id FROM small
			ORDER BY v <-> (SELECT v FROM small WHERE id = 7) LIMIT 5) a}),
	'and answer as the sequential scan');
# what REINDEX CONCURRENTLY leaves behind when it fails: an invalid copy to drop
my $leftover = sql(q{SELECT string_agg(indexrelid::regclass::text, ',') FROM pg_index
	WHERE indrelid = 'small'::regclass AND NOT indisvalid});
like($leftover, qr/^small_idx_ccnew/, 'the failed REINDEX left an invalid copy behind');
sql(qq{DROP INDEX CONCURRENTLY $_}) foreach split(/,/, $leftover);
is(sql(q{SELECT count(*) FROM pg_index WHERE indrelid = 'small'::regclass AND NOT indisvalid}),
	'0', 'dropped, no invalid index remains');

# the conditional retrain: it retrained once, in place, and then had nothing to do
ok(defined cv_wait_for($node, runs('clustervec-retrain-drifted', 'succeeded'), 't', $wait),
	'the retrain job succeeded');
ok(defined cv_wait_for($node, q{SELECT retrains FROM cvivf_health('drifted_idx')}, '1', $wait),
	'it retrained the drifted index');
is(sql(q{SELECT recommendation FROM cvivf_health('drifted_idx')}), 'ok',
	'which no longer needs it');
is(sql(q{SELECT pg_relation_filenode('drifted_idx')}), $filenode{drifted_idx},
	'in place: the same relfilenode');
ok(defined cv_wait_for($node, q{SELECT count(*) >= 2 FROM cron.job_run_details d
		JOIN cron.job j USING (jobid) WHERE j.jobname = 'clustervec-retrain-drifted'
		AND d.status = 'succeeded'}, 't', $wait),
	'the job ran again');
is(sql(q{SELECT retrains FROM cvivf_health('drifted_idx')}), '1',
	'and decided there was nothing to retrain');
sql(q{SELECT cron.unschedule('clustervec-retrain-drifted')});
cv_verify_ok($node, 'drifted_idx');
cv_reachable_ok($node, 'drifted', 'drifted_idx', name => 'the retrained index');

# the conditional rebuild: on while cvivf_health says rebuild, then it ran, then off
ok(defined cv_wait_for($node, runs('clustervec-check-late', 'succeeded'), 't', 150),
	'the check job succeeded');
is(sql(q{SELECT active FROM cron.job WHERE jobname = 'clustervec-rebuild-late'}), 't',
	'and turned the rebuild on');
ok(defined cv_wait_for($node, runs('clustervec-rebuild-late', 'succeeded'), 't', 150),
	'the rebuild ran');
isnt(sql(q{SELECT pg_relation_filenode('late_idx')}), $filenode{late_idx},
	'the index built on an empty table was rebuilt');
is(sql(q{SELECT recommendation FROM cvivf_health('late_idx')}), 'ok',
	'and no longer needs it');
ok(defined cv_wait_for($node, q{SELECT NOT active FROM cron.job
		WHERE jobname = 'clustervec-rebuild-late'}, 't', 150),
	'the next check turned the rebuild off');
is(sql(q{SELECT count(*) FROM cron.job_run_details d JOIN cron.job j USING (jobid)
		WHERE j.jobname = 'clustervec-rebuild-late' AND d.status = 'succeeded'}), '1',
	'the rebuild ran once');
is(sql(q{SELECT count(*) FROM cron.job_run_details d JOIN cron.job j USING (jobid)
		WHERE j.jobname <> 'clustervec-reindex-small' AND d.status NOT IN ('succeeded', 'running', 'starting')}),
	'0', 'no other job failed');
cv_verify_ok($node, 'late_idx');

$node->stop;
done_testing();
