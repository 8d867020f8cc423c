#!/usr/bin/env bash
#
# demo.sh: the main job on a built-in default.  Builds and installs
# clustervec, starts a private PostgreSQL 15 cluster (port 5498, socket under
# /var/tmp/clustervec-demo), generates a deterministic set of 50,000
# clustered 128-dimensional embeddings inside the database, and shows
# nearest-neighbour queries, a query plan and a per-cluster report.
#
# KEEP_RUNNING=1 leaves the server running and prints how to connect.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DEMO_DB=clustervec_demo
ROWS=${DEMO_ROWS:-50000}
CLUSTERS=${DEMO_CLUSTERS:-100}
DIM=${DEMO_DIM:-128}

# psql against the demo database, with aligned output and headers echoed.
demo_psql() {
	cv_psql -d "$DEMO_DB" -P pager=off "$@"
}

print_connect_help() {
	cv_header "Server left running (KEEP_RUNNING=1)"
	local as=""
	if cv_is_root; then
		as="runuser -u ${CV_OS_USER} -- "
	fi
	printf 'connect:  %s%s/psql -h %s -p %s -U %s %s\n' \
		"$as" "$PG_BIN" "$CV_SOCK" "$CV_PORT" "$CV_DB_SUPERUSER" "$DEMO_DB"
	printf 'stop:     %s%s/pg_ctl -D %s stop\n' "$as" "$PG_BIN" "$CV_DATA"
	printf 'log:      %s\n' "$CV_SERVER_LOG"
}

load_demo_data() {
	cv_header "2. Demo data: ${ROWS} x ${DIM} embeddings in ${CLUSTERS} clusters (deterministic)"
	demo_psql <<SQL
-- One backend draws every random number in a fixed order, so setseed makes
-- the data identical on every run.
SET max_parallel_workers_per_gather = 0;
SET jit = off;
SET client_min_messages = warning;
SELECT setseed(0.4242) \\g /dev/null

\\timing on
\\echo 'centres:'
-- Centres uniform in [-1,1]^${DIM}.
CREATE TABLE centres (cluster int PRIMARY KEY, centre real[] NOT NULL);
INSERT INTO centres
SELECT c, array_agg((2 * random() - 1)::real ORDER BY d)
FROM generate_series(0, ${CLUSTERS} - 1) AS c, generate_series(1, ${DIM}) AS d
GROUP BY c
ORDER BY c;

\\echo 'cluster assignment:'
-- Cluster sizes vary (a skewed draw), so some clusters are much larger.
CREATE TABLE assignment (id bigint PRIMARY KEY, cluster int NOT NULL);
INSERT INTO assignment
SELECT i, least(floor(power(random(), 1.6) * ${CLUSTERS})::int, ${CLUSTERS} - 1)
FROM generate_series(1, ${ROWS}) AS i
ORDER BY i;

\\echo 'members:'
-- Members are their centre plus uniform noise in [-0.15, 0.15] per element.
-- Each row's array comes from one subquery over a single scan of assignment
-- in id order, so the random() calls happen in the same order every run.
ANALYZE centres, assignment;
CREATE TABLE items (id bigint PRIMARY KEY, cluster int NOT NULL, embedding cvec(${DIM}) NOT NULL);
INSERT INTO items
SELECT a.id, a.cluster,
       (SELECT array_agg((c.centre[d] + 0.3 * (random() - 0.5))::real ORDER BY d)
        FROM centres AS c, generate_series(1, ${DIM}) AS d
        WHERE c.cluster = a.cluster)::cvec(${DIM})
FROM assignment AS a
ORDER BY a.id;
\\timing off
ANALYZE items;

SELECT count(*) AS rows, count(DISTINCT cluster) AS clusters,
       min(vector_dims(embedding)) AS dims,
       pg_size_pretty(pg_total_relation_size('items')) AS table_size
FROM items;
SQL
}

build_index() {
	cv_header "3. CREATE INDEX ... USING cvivf (k-means lists in relation pages)"
	demo_psql <<SQL
\\timing on
CREATE INDEX items_embedding_idx ON items USING cvivf (embedding cvec_l2_ops) WITH (lists = 100);
\\timing off
SELECT count(*) AS lists, sum(tuples) AS indexed_rows, min(tuples) AS smallest_list,
       max(tuples) AS largest_list,
       pg_size_pretty(pg_relation_size('items_embedding_idx')) AS index_size
FROM cvivf_lists('items_embedding_idx');
SELECT 'every structural invariant holds' AS cvivf_verify
FROM (SELECT cvivf_verify('items_embedding_idx')) AS checked;
SQL
}

nearest_neighbours() {
	cv_header "4. Nearest neighbours through the index: ORDER BY embedding <-> q LIMIT 5 (probes = 10)"
	local qid
	for qid in 1 17171 42424; do
		demo_psql <<SQL
\\echo
\\echo '--- query: the embedding of item ${qid}'
SELECT id AS query_id, cluster AS query_cluster FROM items WHERE id = ${qid};
SELECT i.id, i.cluster, round((i.embedding <-> q.embedding)::numeric, 4) AS l2_distance,
       round((i.embedding <=> q.embedding)::numeric, 6) AS cosine_distance,
       i.cluster = q.cluster AS same_cluster
FROM (SELECT cluster, embedding FROM items WHERE id = ${qid}) AS q
CROSS JOIN LATERAL (
    SELECT id, cluster, embedding FROM items ORDER BY embedding <-> q.embedding LIMIT 5
) AS i;
SQL
	done
	demo_psql <<SQL
\\echo
\\echo '--- 20 queries: neighbours in the cluster of their query, and recall@5 against an exact scan'
CREATE TEMP TABLE index_answers AS
SELECT q.id AS qid, q.cluster AS qcluster, n.id, n.cluster
FROM (SELECT id, cluster, embedding FROM items WHERE id % 2500 = 0) AS q
CROSS JOIN LATERAL (
    SELECT i.id, i.cluster FROM items AS i ORDER BY i.embedding <-> q.embedding LIMIT 5
) AS n;
SET enable_indexscan = off;
CREATE TEMP TABLE exact_answers AS
SELECT q.id AS qid, n.id
FROM (SELECT id, embedding FROM items WHERE id % 2500 = 0) AS q
CROSS JOIN LATERAL (
    SELECT i.id FROM items AS i ORDER BY i.embedding <-> q.embedding, i.id LIMIT 5
) AS n;
RESET enable_indexscan;
SELECT count(*) FILTER (WHERE a.cluster = a.qcluster) AS same_cluster,
       count(*) AS neighbours,
       round(count(e.id)::numeric / count(*), 3) AS recall_at_5
FROM index_answers a LEFT JOIN exact_answers e ON e.qid = a.qid AND e.id = a.id;
SQL
}

show_plan() {
	cv_header "5. Query plan (EXPLAIN ANALYZE) of one nearest-neighbour query"
	demo_psql <<SQL
EXPLAIN (ANALYZE, COSTS ON, BUFFERS OFF)
SELECT id, embedding <-> (SELECT embedding FROM items WHERE id = 1) AS distance
FROM items
ORDER BY embedding <-> (SELECT embedding FROM items WHERE id = 1)
LIMIT 5;
SQL
}

cluster_report() {
	cv_header "6. Cluster health report: cluster_health over every member and every pair"
	demo_psql <<SQL
\\timing on
CREATE TEMP TABLE health AS SELECT * FROM cluster_health('items', 'cluster', 'embedding');
\\timing off
\\echo
\\echo '--- the 10 largest clusters (a selection of the 38 columns)'
SELECT cluster, n,
       round(mean_dist::numeric, 3) AS mean_dist, round(radius::numeric, 3) AS radius,
       round(cohesion::numeric, 4) AS cohesion, round(split_gain::numeric, 3) AS split_gain,
       round(mean_pairwise_dist::numeric, 3) AS mean_pair_dist,
       round(redundancy::numeric, 4) AS redundancy,
       nearest_cluster AS nearest, round(nearest_dist::numeric, 3) AS nearest_dist,
       round(db_ratio::numeric, 3) AS db_ratio,
       round(neighbour_relevance::numeric, 3) AS relevance,
       round(centroid_silhouette::numeric, 3) AS silhouette,
       round(effective_rank::numeric, 1) AS eff_rank
FROM health ORDER BY n DESC, cluster LIMIT 10;
\\echo
\\echo '--- every column of the largest cluster'
\\x on
SELECT * FROM health ORDER BY n DESC, cluster LIMIT 1;
\\x off
\\echo
\\echo '--- cluster_health_summary: the whole clustering'
SELECT k, n, round(davies_bouldin::numeric, 4) AS davies_bouldin,
       round(calinski_harabasz::numeric, 1) AS calinski_harabasz,
       round(cohesion::numeric, 4) AS cohesion,
       round(centroid_silhouette::numeric, 4) AS centroid_silhouette
FROM cluster_health_summary('items', 'cluster', 'embedding');
SQL
}

main() {
	local start=$SECONDS
	cv_init demo 5498
	cv_install_trap
	cv_header "1. Build, install, start a private PostgreSQL ${PG_MAJOR}"
	install_deps
	cv_copy_source
	cv_build >"${CV_WORK}/build.log" 2>&1 || { cat "${CV_WORK}/build.log"; cv_die "make failed"; }
	cv_log "build log: ${CV_WORK}/build.log"
	cv_install >"${CV_WORK}/install.log" 2>&1 || { cat "${CV_WORK}/install.log"; cv_die "make install failed"; }
	cv_init_cluster
	cv_start_server
	if [ "${KEEP_RUNNING:-0}" = 1 ]; then
		CV_KEEP_SERVER=1
	fi
	cv_psql -d postgres -c "CREATE DATABASE ${DEMO_DB}"
	demo_psql -c "CREATE EXTENSION clustervec" \
		-c "SELECT extversion AS clustervec_version, clustervec_simd() AS simd_kernels FROM pg_extension WHERE extname = 'clustervec'"

	load_demo_data
	build_index
	nearest_neighbours
	show_plan
	cluster_report

	cv_header "Done in $((SECONDS - start)) s"
	if [ "${KEEP_RUNNING:-0}" = 1 ]; then
		print_connect_help
	else
		cv_stop_server
		cv_log "server stopped (KEEP_RUNNING=1 leaves it running)"
	fi
}

main "$@"
