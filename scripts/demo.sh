#!/usr/bin/env bash
#
# demo.sh: the main job on a built-in data set, in under two minutes on a
# 2-core machine.  Builds and installs clustervec (the CUDA library only
# where nvcc and a GPU are both present, or with CUDA=1), starts a private
# PostgreSQL 15 cluster (port 5498, socket under /var/tmp/clustervec-demo),
# loads 4,000 real sentence embeddings (WordNet 3.0 glosses embedded with
# all-MiniLM-L6-v2, 384-d, 45 categories: data/wordnet-minilm-sample/),
# builds a cvivf index, prints nearest neighbours as gloss texts and a
# cluster_health report over the 45 categories, and writes the HTML report
# of the Python client when python/clustervec is there.
#
# Knobs (environment):
#   KEEP_RUNNING=1       leave the server running and print how to connect
#   CUDA=1 / CUDA=0      build the CUDA library / never build it (default:
#                        build it where nvcc and a GPU are both present);
#                        when it is built, the server preloads clustervec so
#                        the GPU worker serves builds, searches and statistics
#   DEMO_DATA=synthetic  the former synthetic data set instead (DEMO_ROWS,
#                        default 50,000; DEMO_CLUSTERS, 100; DEMO_DIM, 128)
set -euo pipefail

DEMO_T0=$(date +%s)

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DEMO_DB=clustervec_demo
DEMO_DATA=${DEMO_DATA:-wordnet}
ROWS=${DEMO_ROWS:-50000}
CLUSTERS=${DEMO_CLUSTERS:-100}
DIM=${DEMO_DIM:-128}
WORDNET_FILE=data/wordnet-minilm-sample/rows.tsv.gz
PYTHON=/usr/bin/python3
DEMO_CUDA=0          # 1 when the CUDA library is built (and the worker preloaded)

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

# ---------------------------------------------------------------------------
# Build: what this machine can use first, the CUDA library only where useful
# ---------------------------------------------------------------------------

demo_nvcc() {
	command -v nvcc 2>/dev/null && return 0
	if [ -x /usr/local/cuda/bin/nvcc ]; then
		echo /usr/local/cuda/bin/nvcc
		return 0
	fi
	return 1
}

# The first GPU's name (nvidia-smi -L), "/dev/nvidia0", or nothing.
demo_gpu() {
	local first
	if first=$(nvidia-smi -L 2>/dev/null | head -n 1) && [ -n "$first" ]; then
		printf '%s' "${first%% (UUID*}"
	elif [ -e /dev/nvidia0 ]; then
		printf '/dev/nvidia0'
	fi
}

# Decide whether to build the CUDA library; sets DEMO_CUDA and exports CUDA
# (scripts/lib.sh passes it to make, so the build and the install agree).
decide_cuda() {
	local nvcc gpu
	nvcc=$(demo_nvcc || true)
	gpu=$(demo_gpu || true)
	case "${CUDA:-}" in
		1)
			DEMO_CUDA=1
			cv_log "CUDA library: building it (CUDA=1)${gpu:+; GPU: ${gpu}}${gpu:- although no GPU was found}"
			;;
		0)
			cv_log "CUDA library: skipped (CUDA=0); everything runs on the CPU path"
			;;
		"")
			if [ -n "$nvcc" ] && [ -n "$gpu" ]; then
				DEMO_CUDA=1
				cv_log "CUDA library: building it (nvcc at ${nvcc}; GPU: ${gpu}); CUDA=0 skips it"
			elif [ -n "$nvcc" ]; then
				cv_log "CUDA library: skipped, no GPU here (nvidia-smi -L fails, no /dev/nvidia0) although nvcc is at ${nvcc}; everything runs on the CPU path; build it anyway with: CUDA=1 bash scripts/demo.sh (or make CUDA=1)"
			elif [ -n "$gpu" ]; then
				cv_log "CUDA library: skipped, no nvcc found although a GPU is (${gpu}); install the CUDA toolkit, then: bash scripts/demo.sh (or make CUDA=1)"
			else
				cv_log "CUDA library: skipped, no nvcc and no GPU here; everything runs on the CPU path (on a machine with both, the same command builds it; CUDA=1 forces it)"
			fi
			;;
		*) cv_die "CUDA must be 1 (build the CUDA library) or 0 (skip it), not '${CUDA}'" ;;
	esac
	export CUDA=$DEMO_CUDA
}

demo_build() {
	local jobs=${CV_MAKE_JOBS:-$(cv_cpu_count)} t0=$SECONDS
	cv_log "building the extension and the CPU library in ${CV_SRC} as ${CV_OS_USER} (make -j${jobs})"
	if ! run_as_pg make -j"$jobs" PG_CONFIG="$PG_CONFIG" CUDA=0 >"${CV_WORK}/build.log" 2>&1; then
		tail -n 60 "${CV_WORK}/build.log" >&2
		cv_die "make failed (log: ${CV_WORK}/build.log)"
	fi
	cv_log "built in $((SECONDS - t0)) s (log: ${CV_WORK}/build.log)"
	if [ "$DEMO_CUDA" = 1 ]; then
		t0=$SECONDS
		cv_log "building the CUDA library with nvcc (make -j${jobs} CUDA=1; several minutes on a small machine)"
		if run_as_pg make -j"$jobs" PG_CONFIG="$PG_CONFIG" CUDA=1 >"${CV_WORK}/build-cuda.log" 2>&1; then
			cv_log "CUDA library built in $((SECONDS - t0)) s (log: ${CV_WORK}/build-cuda.log)"
		else
			tail -n 30 "${CV_WORK}/build-cuda.log" >&2
			cv_warn "building the CUDA library failed (log: ${CV_WORK}/build-cuda.log); going on without it, on the CPU path"
			DEMO_CUDA=0
			export CUDA=0
		fi
	fi
}

# ---------------------------------------------------------------------------
# The GPU worker (only when the CUDA library was built)
# ---------------------------------------------------------------------------

gpu_worker_info() {
	[ "$DEMO_CUDA" = 1 ] || return 0
	cv_header "GPU worker: clustervec is preloaded and the worker opens the CUDA library"
	local _ state=""
	for _ in $(seq 1 60); do
		state=$(demo_psql -Atc "SELECT worker_state FROM clustervec_gpu_info()" 2>/dev/null || true)
		case "$state" in ready|unavailable|exited) break ;; esac
		sleep 1
	done
	demo_psql <<'SQL'
\x on
SELECT worker_state, backend, reason, device_name, compute_capability,
       pg_size_pretty(memory_total) AS memory_total, pg_size_pretty(memory_free) AS memory_free
FROM clustervec_gpu_info();
\x off
SQL
	if [ "$state" = ready ]; then
		cv_log "the GPU worker is ready: CREATE INDEX, index scans and cvsearch over its mirror, and cluster_health below run on the GPU"
	else
		cv_log "the GPU worker is not ready (state '${state}'): everything below runs on the CPU path"
	fi
}

gpu_served() {
	[ "$DEMO_CUDA" = 1 ] || return 0
	cv_header "What the GPU served in this demo (clustervec_gpu_info)"
	demo_psql <<'SQL'
SELECT index_builds, health_runs, searches AS index_scans_and_cvsearch, gpu_requests,
       cpu_fallbacks, mirrors, pg_size_pretty(mirror_bytes) AS mirror_bytes
FROM clustervec_gpu_info();
SQL
}

# ---------------------------------------------------------------------------
# The built-in data set: WordNet glosses as MiniLM embeddings
# ---------------------------------------------------------------------------

wordnet_load() {
	cv_header "2. Data: 4,000 WordNet 3.0 glosses as all-MiniLM-L6-v2 embeddings (384-d, 45 categories)"
	cv_log "from ${WORDNET_FILE} (provenance, sampling and licences: data/wordnet-minilm-sample/README.md)"
	demo_psql -v unzip="gzip -dc ${CV_SRC}/${WORDNET_FILE}" <<'SQL'
CREATE TABLE glosses (
    id        int PRIMARY KEY,
    synset_id text NOT NULL UNIQUE,
    category  text NOT NULL,     -- WordNet lexicographer file: noun.animal, verb.motion, ...
    lemmas    text NOT NULL,
    gloss     text NOT NULL,
    embedding cvec(384) NOT NULL -- unit length
);
\timing on
COPY glosses FROM PROGRAM :'unzip' WITH (HEADER true);
\timing off
ANALYZE glosses;
SELECT count(*) AS rows, count(DISTINCT category) AS categories,
       min(vector_dims(embedding)) AS dims,
       round(min(vector_norm(embedding))::numeric, 3) || ' .. ' ||
           round(max(vector_norm(embedding))::numeric, 3) AS norms,
       pg_size_pretty(pg_total_relation_size('glosses')) AS table_size
FROM glosses;
SQL
}

wordnet_index() {
	cv_header "3. CREATE INDEX ... USING cvivf (embedding cvec_cosine_ops): k-means lists in relation pages"
	demo_psql <<'SQL'
\timing on
CREATE INDEX glosses_embedding_idx ON glosses USING cvivf (embedding cvec_cosine_ops) WITH (lists = 50);
\timing off
SELECT count(*) AS lists, sum(tuples) AS indexed_rows, min(tuples) AS smallest_list,
       max(tuples) AS largest_list,
       pg_size_pretty(pg_relation_size('glosses_embedding_idx')) AS index_size
FROM cvivf_lists('glosses_embedding_idx');
SELECT 'every structural invariant holds' AS cvivf_verify
FROM (SELECT cvivf_verify('glosses_embedding_idx')) AS checked;
SQL
	if [ "$DEMO_CUDA" = 1 ]; then
		demo_psql -c "SELECT clustervec_gpu_warm('glosses_embedding_idx') AS mirror_ready_on_the_gpu"
	fi
}

wordnet_neighbours() {
	cv_header "4. Nearest neighbours through the index: ORDER BY embedding <=> q LIMIT 5 (probes = 10 of 50 lists)"
	# Three rows of the sample, named by synset (the same rows for the same
	# seed of data/make_sample.py): an animal, an artifact, a tennis score.
	local synset
	for synset in 01982650-n 03063599-n 13596569-n; do
		demo_psql -v synset="$synset" <<'SQL'
\pset footer off
\pset format unaligned
\pset tuples_only on
SELECT format(E'\n--- query: %s [%s] "%s"', lemmas, category, left(gloss, 90)) FROM glosses WHERE synset_id = :'synset';
\pset format aligned
\pset tuples_only off
SET clustervec.probes = 10;
SELECT row_number() OVER (ORDER BY n.distance) AS rank,
       round(n.distance::numeric, 3) AS cos_dist, n.category,
       left(n.lemmas, 26) AS lemmas, left(n.gloss, 66) AS gloss
FROM (SELECT id, embedding FROM glosses WHERE synset_id = :'synset') AS q
CROSS JOIN LATERAL (
    SELECT g.category, g.lemmas, g.gloss, g.embedding <=> q.embedding AS distance
    FROM glosses AS g
    WHERE g.id <> q.id
    ORDER BY g.embedding <=> q.embedding
    LIMIT 5
) AS n
ORDER BY n.distance;
SQL
	done
	demo_psql <<'SQL'
\echo
\echo '--- 40 queries (every 100th row): neighbours of the same category, and recall@5 of the index against an exact scan'
SET clustervec.probes = 10;
CREATE TEMP TABLE index_answers AS
SELECT q.id AS qid, q.category AS qcategory, n.id, n.category
FROM (SELECT id, category, embedding FROM glosses WHERE id % 100 = 0) AS q
CROSS JOIN LATERAL (
    SELECT g.id, g.category FROM glosses AS g WHERE g.id <> q.id
    ORDER BY g.embedding <=> q.embedding LIMIT 5
) AS n;
SET enable_indexscan = off;
CREATE TEMP TABLE exact_answers AS
SELECT q.id AS qid, n.id
FROM (SELECT id, embedding FROM glosses WHERE id % 100 = 0) AS q
CROSS JOIN LATERAL (
    SELECT g.id FROM glosses AS g WHERE g.id <> q.id
    ORDER BY g.embedding <=> q.embedding, g.id LIMIT 5
) AS n;
RESET enable_indexscan;
SELECT count(*) FILTER (WHERE a.category = a.qcategory) AS same_category,
       count(*) AS neighbours,
       round(count(e.id)::numeric / count(*), 3) AS recall_at_5
FROM index_answers a LEFT JOIN exact_answers e ON e.qid = a.qid AND e.id = a.id;
SQL
}

wordnet_plan() {
	cv_header "5. Query plan (EXPLAIN ANALYZE) of one nearest-neighbour query"
	demo_psql <<'SQL'
SET clustervec.probes = 10;
EXPLAIN (ANALYZE, COSTS ON, BUFFERS OFF)
SELECT lemmas, embedding <=> (SELECT embedding FROM glosses WHERE synset_id = '01982650-n') AS distance
FROM glosses
ORDER BY embedding <=> (SELECT embedding FROM glosses WHERE synset_id = '01982650-n')
LIMIT 5;
SQL
}

wordnet_health() {
	cv_header "6. cluster_health over the 45 WordNet categories (every member, every pair)"
	demo_psql <<'SQL'
\pset footer off
\timing on
CREATE TEMP TABLE health AS
SELECT * FROM cluster_health('glosses', 'category', 'embedding', progress => false);
\timing off
\pset format unaligned
\pset tuples_only on
SELECT format(E'\n%s categories, %s rows, %s to %s rows each (median %s).  Whole clustering: Davies-Bouldin %s (lower is better separated), cohesion %s, centroid silhouette %s (member-weighted).',
              s.k, s.n, h.smallest, h.largest, h.median,
              round(s.davies_bouldin::numeric, 2), round(s.cohesion::numeric, 3),
              round(s.centroid_silhouette::numeric, 3))
FROM cluster_health_summary('glosses', 'category', 'embedding', progress => false) AS s,
     (SELECT min(n) AS smallest, max(n) AS largest,
             percentile_disc(0.5) WITHIN GROUP (ORDER BY n) AS median FROM health) AS h;

\echo
\echo 'TIGHT: highest cohesion (mean cosine of a member to its category centroid)'
SELECT format('  %-20s cohesion %s   mean pairwise cos %s   n %s',
              cluster_text, to_char(cohesion, '0.000'), to_char(mean_pairwise_cos, '0.000'), n)
FROM health ORDER BY cohesion DESC, cluster_text LIMIT 5;
\echo 'LOOSE: lowest cohesion'
SELECT format('  %-20s cohesion %s   mean pairwise cos %s   n %s',
              cluster_text, to_char(cohesion, '0.000'), to_char(mean_pairwise_cos, '0.000'), n)
FROM health ORDER BY cohesion, cluster_text LIMIT 5;

SELECT format(E'\nOVERLAP: %s of %s categories have db_ratio > 1: their mean radius plus that of a neighbour exceeds', count(*) FILTER (WHERE db_ratio > 1), count(*))
       || E'\n         the distance of the two centroids, so the categories mix.  Closest to a neighbour (lowest centroid'
       || E'\n         silhouette), with the share of members nearer their own centroid than to the 5 nearest others:'
FROM health;
SELECT format('  %-20s nearest %-20s centroid silhouette %s   db_ratio %s   %s%% of members nearer their own centroid',
              cluster_text, nearest_cluster_text, to_char(centroid_silhouette, 'S0.000'),
              to_char(db_ratio, '0.00'), round(100 * neighbour_relevance))
FROM health ORDER BY centroid_silhouette, cluster_text LIMIT 5;
\echo 'WELL SEPARATED: highest centroid silhouette'
SELECT format('  %-20s nearest %-20s centroid silhouette %s   db_ratio %s   %s%% of members nearer their own centroid',
              cluster_text, nearest_cluster_text, to_char(centroid_silhouette, 'S0.000'),
              to_char(db_ratio, '0.00'), round(100 * neighbour_relevance))
FROM health ORDER BY centroid_silhouette DESC, cluster_text LIMIT 4;

\echo
\echo 'SUB-STRUCTURE: the best two-way split of each category (two-means): split_gain = the share of the spread'
\echo '               the split removes; split_silhouette = how far apart the two halves are (near 0: one blob)'
SELECT format('  %-20s split_silhouette %s   split_gain %s   halves %s / %s   n %s',
              cluster_text, to_char(split_silhouette, '0.000'), to_char(split_gain, '0.000'),
              round(split_balance * n), n - round(split_balance * n), n)
FROM health ORDER BY split_silhouette DESC NULLS LAST, cluster_text LIMIT 5;

\echo
\echo 'SIZES: the largest and the smallest categories of the sample (rows; the sample keeps at least 40 each)'
SELECT '  largest:  ' || string_agg(format('%s %s', cluster_text, n), ', ' ORDER BY n DESC, cluster_text)
FROM (SELECT * FROM health ORDER BY n DESC, cluster_text LIMIT 6) AS t;
SELECT format('  smallest: %s categories have %s rows (the floor of the sample), e.g. %s', count(*), min(n),
              array_to_string((array_agg(cluster_text ORDER BY cluster_text))[1:4], ', '))
FROM health WHERE n = (SELECT min(n) FROM health);
\pset format aligned
\pset tuples_only off
\echo
\echo 'All 38 statistics per category: SELECT * FROM cluster_health(''glosses'', ''category'', ''embedding'');'
SQL
}

# The categories themselves as an index: cvlattice, and the cvivf index's recall.
wordnet_lattice() {
	cv_header "7. CREATE INDEX ... USING cvlattice (embedding, category): the 45 categories as the lists"
	demo_psql <<'SQL'
CREATE INDEX glosses_lattice_idx ON glosses USING cvlattice (embedding cvec_cosine_ops, category);
SELECT label AS category, members, round((centroid <=> (SELECT avg(embedding) FROM glosses))::numeric, 3) AS centroid_to_mean_cos_dist
FROM cvlattice_lists('glosses_lattice_idx') ORDER BY members DESC, label LIMIT 5;
\echo
\echo '--- the 3 nearest glosses of one category to a query, exactly within the category, through the index:'
SET enable_seqscan = off;
EXPLAIN (COSTS OFF)
SELECT lemmas FROM glosses WHERE category = 'noun.animal'
ORDER BY embedding <=> (SELECT embedding FROM glosses WHERE synset_id = '01982650-n') LIMIT 3;
SELECT lemmas, left(gloss, 70) AS gloss FROM glosses WHERE category = 'noun.animal'
ORDER BY embedding <=> (SELECT embedding FROM glosses WHERE synset_id = '01982650-n') LIMIT 3;
RESET enable_seqscan;
\echo
\echo '--- recall@10 of the cvivf index at probes 10, measured against exact search (cvivf_recall, 200 sampled rows):'
SELECT queries, probes, round(recall::numeric, 3) AS recall_at_10,
       round(recall_low::numeric, 3) AS low_95, round(recall_high::numeric, 3) AS high_95
FROM cvivf_recall('glosses_embedding_idx', 200, 10, 10);
SQL
}

# The Python client's HTML report, when python/clustervec is there.
wordnet_html_report() {
	local out="${CV_WORK}/report.html" log="${CV_WORK}/report.log" why
	if [ ! -d "${CV_SRC}/python/clustervec" ]; then
		cv_log "HTML report: skipped (no python/clustervec in this checkout)"
		return 0
	fi
	# Run from the work folder, not the build copy, whose clustervec.so (the
	# PostgreSQL module) Python would otherwise try to import as clustervec.
	if ! run_as_pg -C "$CV_WORK" env PYTHONPATH="${CV_SRC}/python" "$PYTHON" -c 'import clustervec.report' >"$log" 2>&1; then
		why=$(tail -n 1 "$log")
		cv_log "HTML report: skipped (python/clustervec does not import: ${why})"
		return 0
	fi
	cv_header "8. HTML report of the Python client (python3 -m clustervec.report)"
	rm -f "$out"
	if run_as_pg -C "$CV_WORK" env PYTHONPATH="${CV_SRC}/python" "$PYTHON" -m clustervec.report \
		--dsn "host=${CV_SOCK} port=${CV_PORT} dbname=${DEMO_DB} user=${CV_DB_SUPERUSER}" \
		--table glosses --label category --vector embedding --out "$out" \
		--title "clustervec: 4,000 WordNet glosses in 45 categories (all-MiniLM-L6-v2)" >"$log" 2>&1 \
		&& [ -s "$out" ]; then
		cv_log "HTML report: ${out}"
	else
		tail -n 15 "$log" >&2
		cv_warn "the HTML report failed (log: ${log}); the rest of the demo is unaffected"
	fi
}

# The nightly cluster_health snapshot of the README (pg_cron recipe), taken
# twice by hand: once now (dated a day back), once after 400 new glosses
# arrive drifted (noun.artifact glosses moved halfway to noun.person's mean),
# then rendered as a history page (python3 -m clustervec.report --history).
wordnet_history_report() {
	local out="${CV_WORK}/history.html" log="${CV_WORK}/history.log"
	[ -d "${CV_SRC}/python/clustervec" ] || return 0
	cv_header "9. Health over time: two snapshots and the history page"
	demo_psql -q <<'SQL'
CREATE TABLE cluster_health_history AS
SELECT now() - interval '1 day' AS taken_at,
	s.k AS summary_k, s.n AS summary_n, s.davies_bouldin AS summary_davies_bouldin,
	s.calinski_harabasz AS summary_calinski_harabasz, s.cohesion AS summary_cohesion,
	s.centroid_silhouette AS summary_centroid_silhouette, h.*
FROM cluster_health_summary('glosses', 'category', 'embedding', progress => false) s,
	cluster_health('glosses', 'category', 'embedding', progress => false) h;
CREATE TEMP TABLE drift AS
SELECT avg(embedding) AS person, array_fill(0.5::real, ARRAY[384])::cvec(384) AS half
FROM glosses WHERE category = 'noun.person';
INSERT INTO glosses (id, synset_id, category, lemmas, gloss, embedding)
SELECT 1000000 + g.id, g.synset_id || '#drifted', g.category, g.lemmas, g.gloss,
	l2_normalize(g.embedding * drift.half + drift.person * drift.half)
FROM glosses g, drift
WHERE g.category = 'noun.artifact'
ORDER BY g.id LIMIT 400;
INSERT INTO cluster_health_history
SELECT now(), s.k, s.n, s.davies_bouldin, s.calinski_harabasz, s.cohesion,
	s.centroid_silhouette, h.*
FROM cluster_health_summary('glosses', 'category', 'embedding', progress => false) s,
	cluster_health('glosses', 'category', 'embedding', progress => false) h;
SQL
	demo_psql -c "SELECT DISTINCT ON (taken_at) taken_at::date AS day, summary_n AS rows, round(summary_davies_bouldin::numeric, 3) AS davies_bouldin, round(summary_cohesion::numeric, 4) AS cohesion, round(summary_centroid_silhouette::numeric, 4) AS centroid_silhouette FROM cluster_health_history ORDER BY taken_at"
	rm -f "$out"
	if run_as_pg -C "$CV_WORK" env PYTHONPATH="${CV_SRC}/python" "$PYTHON" -m clustervec.report \
		--dsn "host=${CV_SOCK} port=${CV_PORT} dbname=${DEMO_DB} user=${CV_DB_SUPERUSER}" \
		--history cluster_health_history --out "$out" \
		--title "clustervec: WordNet glosses, before and after 400 drifted rows" >"$log" 2>&1 \
		&& [ -s "$out" ]; then
		cv_log "History report: ${out}"
	else
		tail -n 15 "$log" >&2
		cv_warn "the history report failed (log: ${log}); the rest of the demo is unaffected"
	fi
}

# ---------------------------------------------------------------------------
# DEMO_DATA=synthetic: the former generated data set (50,000 x 128 in 100
# Gaussian clusters, made inside the database), for larger runs
# ---------------------------------------------------------------------------

synthetic_load() {
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

synthetic_index() {
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

synthetic_neighbours() {
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

synthetic_plan() {
	cv_header "5. Query plan (EXPLAIN ANALYZE) of one nearest-neighbour query"
	demo_psql <<SQL
EXPLAIN (ANALYZE, COSTS ON, BUFFERS OFF)
SELECT id, embedding <-> (SELECT embedding FROM items WHERE id = 1) AS distance
FROM items
ORDER BY embedding <-> (SELECT embedding FROM items WHERE id = 1)
LIMIT 5;
SQL
}

synthetic_report() {
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
	cv_init demo 5498
	cv_install_trap
	case "$DEMO_DATA" in
		wordnet|synthetic) ;;
		*) cv_die "DEMO_DATA must be wordnet (the default) or synthetic, not '${DEMO_DATA}'" ;;
	esac
	cv_header "1. Build, install, start a private PostgreSQL ${PG_MAJOR}"
	install_deps
	decide_cuda
	cv_copy_source
	demo_build
	cv_install >"${CV_WORK}/install.log" 2>&1 || { cat "${CV_WORK}/install.log"; cv_die "make install failed"; }
	if [ "$DEMO_CUDA" = 1 ]; then
		cv_add_conf "shared_preload_libraries = 'clustervec'"
	fi
	cv_init_cluster
	cv_start_server
	if [ "${KEEP_RUNNING:-0}" = 1 ]; then
		CV_KEEP_SERVER=1
	fi
	cv_psql -d postgres -c "CREATE DATABASE ${DEMO_DB}"
	demo_psql -c "CREATE EXTENSION clustervec" \
		-c "SELECT extversion AS clustervec_version, clustervec_simd() AS simd_kernels FROM pg_extension WHERE extname = 'clustervec'"
	gpu_worker_info

	if [ "$DEMO_DATA" = synthetic ]; then
		synthetic_load
		synthetic_index
		synthetic_neighbours
		synthetic_plan
		synthetic_report
	else
		wordnet_load
		wordnet_index
		wordnet_neighbours
		wordnet_plan
		wordnet_health
		wordnet_lattice
		wordnet_html_report
		wordnet_history_report
	fi
	gpu_served

	cv_header "Done"
	if [ "${KEEP_RUNNING:-0}" = 1 ]; then
		print_connect_help
	else
		cv_stop_server
		cv_log "server stopped (KEEP_RUNNING=1 leaves it running)"
	fi
	printf 'demo took %s s (target: under 120 s on a 2-core machine)\n' "$(($(date +%s) - DEMO_T0))"
}

main "$@"
