-- clustervec 0.1.0: the cvec type, distances, arithmetic, casts, aggregates.
\echo Use "CREATE EXTENSION clustervec" to load this file. \quit

-- type --------------------------------------------------------------------

CREATE TYPE cvec;

CREATE FUNCTION cvec_in(cstring, oid, integer) RETURNS cvec
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cvec_out(cvec) RETURNS cstring
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cvec_typmod_in(cstring[]) RETURNS integer
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cvec_recv(internal, oid, integer) RETURNS cvec
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cvec_send(cvec) RETURNS bytea
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- Stored uncompressed, like pgvector: floats barely compress and every
-- distance would pay for decompression.
CREATE TYPE cvec (
	INPUT = cvec_in,
	OUTPUT = cvec_out,
	TYPMOD_IN = cvec_typmod_in,
	RECEIVE = cvec_recv,
	SEND = cvec_send,
	STORAGE = external
);

COMMENT ON TYPE cvec IS 'vector of float4 elements, laid out like pgvector''s vector';

-- distances -----------------------------------------------------------------
-- COST 20: a distance reads (and often detoasts) whole vectors, far more than
-- the one cpu_operator_cost of a plain operator; without it the planner
-- prefers a sequential scan over an index scan that reads a small fraction.

CREATE FUNCTION l2_distance(cvec, cvec) RETURNS float8
	AS 'MODULE_PATHNAME', 'cvec_l2_distance' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE COST 20;
CREATE FUNCTION l2_squared_distance(cvec, cvec) RETURNS float8
	AS 'MODULE_PATHNAME', 'cvec_l2_squared_distance' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE COST 20;
CREATE FUNCTION inner_product(cvec, cvec) RETURNS float8
	AS 'MODULE_PATHNAME', 'cvec_inner_product' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE COST 20;
CREATE FUNCTION negative_inner_product(cvec, cvec) RETURNS float8
	AS 'MODULE_PATHNAME', 'cvec_negative_inner_product' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE COST 20;
CREATE FUNCTION cosine_distance(cvec, cvec) RETURNS float8
	AS 'MODULE_PATHNAME', 'cvec_cosine_distance' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE COST 20;
CREATE FUNCTION l1_distance(cvec, cvec) RETURNS float8
	AS 'MODULE_PATHNAME', 'cvec_l1_distance' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE COST 20;

CREATE OPERATOR <-> (
	LEFTARG = cvec, RIGHTARG = cvec, FUNCTION = l2_distance, COMMUTATOR = '<->'
);
CREATE OPERATOR <#> (
	LEFTARG = cvec, RIGHTARG = cvec, FUNCTION = negative_inner_product, COMMUTATOR = '<#>'
);
CREATE OPERATOR <=> (
	LEFTARG = cvec, RIGHTARG = cvec, FUNCTION = cosine_distance, COMMUTATOR = '<=>'
);
CREATE OPERATOR <+> (
	LEFTARG = cvec, RIGHTARG = cvec, FUNCTION = l1_distance, COMMUTATOR = '<+>'
);

-- functions -------------------------------------------------------------------

CREATE FUNCTION vector_dims(cvec) RETURNS integer
	AS 'MODULE_PATHNAME', 'cvec_dims' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION vector_norm(cvec) RETURNS float8
	AS 'MODULE_PATHNAME', 'cvec_norm' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION l2_normalize(cvec) RETURNS cvec
	AS 'MODULE_PATHNAME', 'cvec_l2_normalize' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION subvector(cvec, integer, integer) RETURNS cvec
	AS 'MODULE_PATHNAME', 'cvec_subvector' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- The distance kernels in use ('scalar', 'avx2' or 'avx512'); set by clustervec.simd.
CREATE FUNCTION clustervec_simd() RETURNS text
	AS 'MODULE_PATHNAME', 'clustervec_simd' LANGUAGE C STABLE STRICT PARALLEL SAFE;

-- arithmetic --------------------------------------------------------------------

CREATE FUNCTION cvec_add(cvec, cvec) RETURNS cvec
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cvec_sub(cvec, cvec) RETURNS cvec
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cvec_mul(cvec, cvec) RETURNS cvec
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cvec_concat(cvec, cvec) RETURNS cvec
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OPERATOR + (LEFTARG = cvec, RIGHTARG = cvec, FUNCTION = cvec_add, COMMUTATOR = +);
CREATE OPERATOR - (LEFTARG = cvec, RIGHTARG = cvec, FUNCTION = cvec_sub);
CREATE OPERATOR * (LEFTARG = cvec, RIGHTARG = cvec, FUNCTION = cvec_mul, COMMUTATOR = *);
-- without it, cvec || '[4,5]' resolves to text concatenation (anynonarray || text)
CREATE OPERATOR || (LEFTARG = cvec, RIGHTARG = cvec, FUNCTION = cvec_concat);

-- comparison ----------------------------------------------------------------------

CREATE FUNCTION cvec_lt(cvec, cvec) RETURNS bool
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cvec_le(cvec, cvec) RETURNS bool
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cvec_eq(cvec, cvec) RETURNS bool
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cvec_ne(cvec, cvec) RETURNS bool
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cvec_ge(cvec, cvec) RETURNS bool
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cvec_gt(cvec, cvec) RETURNS bool
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cvec_cmp(cvec, cvec) RETURNS integer
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OPERATOR < (
	LEFTARG = cvec, RIGHTARG = cvec, FUNCTION = cvec_lt,
	COMMUTATOR = >, NEGATOR = >=, RESTRICT = scalarltsel, JOIN = scalarltjoinsel
);
CREATE OPERATOR <= (
	LEFTARG = cvec, RIGHTARG = cvec, FUNCTION = cvec_le,
	COMMUTATOR = >=, NEGATOR = >, RESTRICT = scalarlesel, JOIN = scalarlejoinsel
);
CREATE OPERATOR = (
	LEFTARG = cvec, RIGHTARG = cvec, FUNCTION = cvec_eq,
	COMMUTATOR = =, NEGATOR = <>, RESTRICT = eqsel, JOIN = eqjoinsel
);
CREATE OPERATOR <> (
	LEFTARG = cvec, RIGHTARG = cvec, FUNCTION = cvec_ne,
	COMMUTATOR = <>, NEGATOR = =, RESTRICT = neqsel, JOIN = neqjoinsel
);
CREATE OPERATOR >= (
	LEFTARG = cvec, RIGHTARG = cvec, FUNCTION = cvec_ge,
	COMMUTATOR = <=, NEGATOR = <, RESTRICT = scalargesel, JOIN = scalargejoinsel
);
CREATE OPERATOR > (
	LEFTARG = cvec, RIGHTARG = cvec, FUNCTION = cvec_gt,
	COMMUTATOR = <, NEGATOR = <=, RESTRICT = scalargtsel, JOIN = scalargtjoinsel
);

CREATE OPERATOR CLASS cvec_ops
	DEFAULT FOR TYPE cvec USING btree AS
	OPERATOR 1 <,
	OPERATOR 2 <=,
	OPERATOR 3 =,
	OPERATOR 4 >=,
	OPERATOR 5 >,
	FUNCTION 1 cvec_cmp(cvec, cvec);

-- casts ------------------------------------------------------------------------------

CREATE FUNCTION cvec(cvec, integer, boolean) RETURNS cvec
	AS 'MODULE_PATHNAME', 'cvec_typmod' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION array_to_cvec(integer[], integer, boolean) RETURNS cvec
	AS 'MODULE_PATHNAME', 'cvec_from_array' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION array_to_cvec(real[], integer, boolean) RETURNS cvec
	AS 'MODULE_PATHNAME', 'cvec_from_array' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION array_to_cvec(double precision[], integer, boolean) RETURNS cvec
	AS 'MODULE_PATHNAME', 'cvec_from_array' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION array_to_cvec(numeric[], integer, boolean) RETURNS cvec
	AS 'MODULE_PATHNAME', 'cvec_from_array' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cvec_to_float4(cvec, integer, boolean) RETURNS real[]
	AS 'MODULE_PATHNAME', 'cvec_to_real_array' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE CAST (cvec AS cvec) WITH FUNCTION cvec(cvec, integer, boolean) AS IMPLICIT;
CREATE CAST (integer[] AS cvec) WITH FUNCTION array_to_cvec(integer[], integer, boolean) AS ASSIGNMENT;
CREATE CAST (real[] AS cvec) WITH FUNCTION array_to_cvec(real[], integer, boolean) AS ASSIGNMENT;
CREATE CAST (double precision[] AS cvec) WITH FUNCTION array_to_cvec(double precision[], integer, boolean) AS ASSIGNMENT;
CREATE CAST (numeric[] AS cvec) WITH FUNCTION array_to_cvec(numeric[], integer, boolean) AS ASSIGNMENT;
CREATE CAST (cvec AS real[]) WITH FUNCTION cvec_to_float4(cvec, integer, boolean) AS IMPLICIT;

-- aggregates: the state is float8[] {n, s_1, ..., s_d}, a real SQL type with a
-- combine function, so parallel query and Citus merge partial states.

CREATE FUNCTION cvec_accum(double precision[], cvec) RETURNS double precision[]
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cvec_combine(double precision[], double precision[]) RETURNS double precision[]
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cvec_avg(double precision[]) RETURNS cvec
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION cvec_sum(double precision[]) RETURNS cvec
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE AGGREGATE avg(cvec) (
	SFUNC = cvec_accum,
	STYPE = double precision[],
	FINALFUNC = cvec_avg,
	COMBINEFUNC = cvec_combine,
	INITCOND = '{0}',
	PARALLEL = SAFE
);

CREATE AGGREGATE sum(cvec) (
	SFUNC = cvec_accum,
	STYPE = double precision[],
	FINALFUNC = cvec_sum,
	COMBINEFUNC = cvec_combine,
	INITCOND = '{0}',
	PARALLEL = SAFE
);

-- cvivf: the IVF index access method ----------------------------------------

CREATE FUNCTION cvivfhandler(internal) RETURNS index_am_handler
	AS 'MODULE_PATHNAME' LANGUAGE C;

CREATE ACCESS METHOD cvivf TYPE INDEX HANDLER cvivfhandler;
COMMENT ON ACCESS METHOD cvivf IS 'inverted-file index: k-means lists in relation pages';

-- Support function 1 is the operator's own function: it tells the index its metric.
CREATE OPERATOR CLASS cvec_l2_ops
	DEFAULT FOR TYPE cvec USING cvivf AS
	OPERATOR 1 <-> (cvec, cvec) FOR ORDER BY float_ops,
	FUNCTION 1 l2_distance(cvec, cvec);

CREATE OPERATOR CLASS cvec_ip_ops
	FOR TYPE cvec USING cvivf AS
	OPERATOR 1 <#> (cvec, cvec) FOR ORDER BY float_ops,
	FUNCTION 1 negative_inner_product(cvec, cvec);

CREATE OPERATOR CLASS cvec_cosine_ops
	FOR TYPE cvec USING cvivf AS
	OPERATOR 1 <=> (cvec, cvec) FOR ORDER BY float_ops,
	FUNCTION 1 cosine_distance(cvec, cvec);

-- Per list: live tuples, centroid norm, then since the build (NULL for an
-- index built before clustervec recorded it): the build's tuples, inserts,
-- deletes, the build's mean distance of members to the centroid; the centroid.
CREATE FUNCTION cvivf_lists(index regclass)
	RETURNS TABLE(list integer, tuples bigint, centroid_norm float8,
	              build_tuples bigint, inserted_since_build bigint,
	              deleted_since_build bigint, build_mean_distance float8, centroid cvec)
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE;
CREATE FUNCTION cvivf_list_of(index regclass, v cvec) RETURNS integer
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE;
CREATE FUNCTION cvivf_verify(index regclass) RETURNS void
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE;
-- recall@k at probes, against exact search, for `queries` sampled rows (recall.c)
CREATE FUNCTION cvivf_recall(index regclass, queries int DEFAULT 100, k int DEFAULT 10,
                             probes int DEFAULT NULL, seed int DEFAULT 0,
                             OUT queries int, OUT k int, OUT probes int, OUT recall float8,
                             OUT std_error float8, OUT recall_low float8, OUT recall_high float8,
                             OUT min_recall float8, OUT mean_returned float8, OUT rows bigint,
                             OUT ms_per_query float8, OUT elapsed_ms float8)
	AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE CALLED ON NULL INPUT PARALLEL RESTRICTED;
-- recall@10 against probes, for clustervec.target_recall (calibrate.c): measured
-- again over the index's rows and stored, or as stored
CREATE FUNCTION cvivf_calibrate(index regclass, queries int DEFAULT 500,
                                OUT probes int, OUT recall float8, OUT k int, OUT source text)
	RETURNS SETOF record AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION cvivf_calibration(index regclass,
                                  OUT probes int, OUT recall float8, OUT k int, OUT source text)
	RETURNS SETOF record AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

-- new centroids and lists in place, one metapage record switching to them
-- (retrain.c): reads and writes go on; inserts wait only for the switch
CREATE FUNCTION cvivf_retrain(index regclass,
                              OUT old_lists integer, OUT lists integer, OUT rows bigint,
                              OUT rows_caught_up bigint, OUT new_pages bigint,
                              OUT old_pages bigint, OUT pages_freed bigint)
	RETURNS record AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;

-- drift since the build and a recommendation, for cvivf and cvlattice (health.c);
-- reads the directory only, unless exact (then every list)
CREATE FUNCTION cvivf_health(index regclass, exact boolean DEFAULT false,
                             OUT kind text, OUT lists integer, OUT rows bigint,
                             OUT build_rows bigint, OUT inserted_since_build bigint,
                             OUT deleted_since_build bigint, OUT changed_fraction float8,
                             OUT list_size_max_mean float8, OUT list_size_cv float8,
                             OUT build_list_size_max_mean float8, OUT build_list_size_cv float8,
                             OUT mean_distance_build float8, OUT mean_distance_now float8,
                             OUT distance_ratio float8, OUT dead_space_fraction float8,
                             OUT index_blocks bigint, OUT build_blocks bigint,
                             OUT recommendation text, OUT reason text, OUT retrains bigint)
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

-- cvlattice: an index over the user's own clusters ---------------------------
-- CREATE INDEX ON items USING cvlattice (embedding cvec_l2_ops, cluster_label):
-- one list per distinct label, its centroid the mean of its members.

CREATE FUNCTION cvlatticehandler(internal) RETURNS index_am_handler
	AS 'MODULE_PATHNAME' LANGUAGE C;

CREATE ACCESS METHOD cvlattice TYPE INDEX HANDLER cvlatticehandler;
COMMENT ON ACCESS METHOD cvlattice IS 'lattice index: one list per label, centroids the means of the labels';

-- The vector column: the same operator classes as cvivf's.
CREATE OPERATOR CLASS cvec_l2_ops
	DEFAULT FOR TYPE cvec USING cvlattice AS
	OPERATOR 1 <-> (cvec, cvec) FOR ORDER BY float_ops,
	FUNCTION 1 l2_distance(cvec, cvec);

CREATE OPERATOR CLASS cvec_ip_ops
	FOR TYPE cvec USING cvlattice AS
	OPERATOR 1 <#> (cvec, cvec) FOR ORDER BY float_ops,
	FUNCTION 1 negative_inner_product(cvec, cvec);

CREATE OPERATOR CLASS cvec_cosine_ops
	FOR TYPE cvec USING cvlattice AS
	OPERATOR 1 <=> (cvec, cvec) FOR ORDER BY float_ops,
	FUNCTION 1 cosine_distance(cvec, cvec);

-- The label column.  One family: an operator class for any type (anyelement,
-- so every type gets a default; the index compares labels with the type's
-- default btree comparison and refuses a type without one), and operator
-- classes for common label types whose equality operator makes
-- "label = x" and "label = ANY(...)" index conditions.  For another type,
-- ALTER OPERATOR FAMILY cvlattice_label_ops USING cvlattice
-- ADD OPERATOR 1 = (t, t) does the same.
CREATE FUNCTION cvlattice_label_cmp(anyelement, anyelement) RETURNS integer
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;

CREATE OPERATOR FAMILY cvlattice_label_ops USING cvlattice;

CREATE OPERATOR CLASS any_label_ops
	DEFAULT FOR TYPE anyelement USING cvlattice FAMILY cvlattice_label_ops AS
	FUNCTION 1 cvlattice_label_cmp(anyelement, anyelement);
CREATE OPERATOR CLASS int2_label_ops
	DEFAULT FOR TYPE int2 USING cvlattice FAMILY cvlattice_label_ops AS
	OPERATOR 1 = (int2, int2), FUNCTION 1 btint2cmp(int2, int2);
CREATE OPERATOR CLASS int4_label_ops
	DEFAULT FOR TYPE int4 USING cvlattice FAMILY cvlattice_label_ops AS
	OPERATOR 1 = (int4, int4), FUNCTION 1 btint4cmp(int4, int4);
CREATE OPERATOR CLASS int8_label_ops
	DEFAULT FOR TYPE int8 USING cvlattice FAMILY cvlattice_label_ops AS
	OPERATOR 1 = (int8, int8), FUNCTION 1 btint8cmp(int8, int8);
CREATE OPERATOR CLASS oid_label_ops
	DEFAULT FOR TYPE oid USING cvlattice FAMILY cvlattice_label_ops AS
	OPERATOR 1 = (oid, oid), FUNCTION 1 btoidcmp(oid, oid);
CREATE OPERATOR CLASS bool_label_ops
	DEFAULT FOR TYPE bool USING cvlattice FAMILY cvlattice_label_ops AS
	OPERATOR 1 = (bool, bool), FUNCTION 1 btboolcmp(bool, bool);
CREATE OPERATOR CLASS text_label_ops
	DEFAULT FOR TYPE text USING cvlattice FAMILY cvlattice_label_ops AS
	OPERATOR 1 = (text, text), FUNCTION 1 bttextcmp(text, text);
CREATE OPERATOR CLASS bpchar_label_ops
	DEFAULT FOR TYPE bpchar USING cvlattice FAMILY cvlattice_label_ops AS
	OPERATOR 1 = (bpchar, bpchar), FUNCTION 1 bpcharcmp(bpchar, bpchar);
CREATE OPERATOR CLASS uuid_label_ops
	DEFAULT FOR TYPE uuid USING cvlattice FAMILY cvlattice_label_ops AS
	OPERATOR 1 = (uuid, uuid), FUNCTION 1 uuid_cmp(uuid, uuid);
CREATE OPERATOR CLASS date_label_ops
	DEFAULT FOR TYPE date USING cvlattice FAMILY cvlattice_label_ops AS
	OPERATOR 1 = (date, date), FUNCTION 1 date_cmp(date, date);
CREATE OPERATOR CLASS numeric_label_ops
	DEFAULT FOR TYPE numeric USING cvlattice FAMILY cvlattice_label_ops AS
	OPERATOR 1 = (numeric, numeric), FUNCTION 1 numeric_cmp(numeric, numeric);
-- integers of different widths: "bigint_label = 7" is an index condition
ALTER OPERATOR FAMILY cvlattice_label_ops USING cvlattice ADD
	OPERATOR 1 = (int2, int4), OPERATOR 1 = (int2, int8),
	OPERATOR 1 = (int4, int2), OPERATOR 1 = (int4, int8),
	OPERATOR 1 = (int8, int2), OPERATOR 1 = (int8, int4);

CREATE FUNCTION cvlattice_lists(index regclass)
	RETURNS TABLE(list integer, label text, members bigint, centroid cvec,
	              inserted_since_build bigint)
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE;
-- Health observed by the GPU searches over a cvlattice index (clustervec.observe).
CREATE FUNCTION cluster_health_observed(index regclass)
	RETURNS TABLE(cluster bigint, cluster_text text, n bigint, n_seen bigint, coverage float8,
	              inertia_seen float8, mean_dist_seen float8, cohesion_seen float8,
	              queries bigint)
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION cluster_health_observed_reset(index regclass) RETURNS void
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION cvlattice_verify(index regclass) RETURNS void
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE;

-- cluster health: the 38 statistics of STATISTICS.md ---------------------------

-- One row of cluster_health: the cluster, the 38 statistics of
-- STATISTICS.md in its order, and the labels as text.
CREATE TYPE cluster_health_row AS (
	cluster bigint,
	n bigint, centroid_norm float8, inertia float8, mean_dist float8,
	spread float8, skew float8, kurtosis float8, radius float8,
	cohesion float8, outlier_ratio float8, core_periphery_ratio float8,
	mean_norm float8, norm_cv float8, embedding_quality float8,
	novelty float8, between_ss float8,
	split_gain float8, split_balance float8, split_separation float8,
	mean_pairwise_dist float8, sigma float8, mean_pairwise_cos float8,
	redundancy float8, redundant_members float8, breadth float8,
	local_density float8, dist_entropy float8, entanglement float8,
	split_silhouette float8,
	potential_depth float8, curvature float8, escape_probability float8,
	nearest_cluster bigint, nearest_dist float8, db_ratio float8,
	neighbour_relevance float8, centroid_silhouette float8,
	effective_rank float8,
	cluster_text text, nearest_cluster_text text
);

CREATE FUNCTION cluster_health(
	source regclass, cluster_column name, vector_column name,
	order_column name DEFAULT NULL,
	outlier_z float8 DEFAULT 2.0, dup_cos float8 DEFAULT 0.95, neighbours int DEFAULT 5,
	sigma_bins int DEFAULT 256, entropy_bins int DEFAULT 20, rank_max_members int DEFAULT 2000,
	progress boolean DEFAULT true)
	RETURNS SETOF cluster_health_row
	AS 'MODULE_PATHNAME' LANGUAGE C STABLE PARALLEL RESTRICTED;

CREATE FUNCTION cluster_health_query(
	query text,
	outlier_z float8 DEFAULT 2.0, dup_cos float8 DEFAULT 0.95, neighbours int DEFAULT 5,
	sigma_bins int DEFAULT 256, entropy_bins int DEFAULT 20, rank_max_members int DEFAULT 2000,
	progress boolean DEFAULT true)
	RETURNS SETOF cluster_health_row
	AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION cluster_health_summary(
	source regclass, cluster_column name, vector_column name,
	order_column name DEFAULT NULL,
	outlier_z float8 DEFAULT 2.0, dup_cos float8 DEFAULT 0.95, neighbours int DEFAULT 5,
	sigma_bins int DEFAULT 256, entropy_bins int DEFAULT 20, rank_max_members int DEFAULT 2000,
	progress boolean DEFAULT true,
	OUT k bigint, OUT n bigint, OUT davies_bouldin float8, OUT calinski_harabasz float8,
	OUT cohesion float8, OUT centroid_silhouette float8)
	AS 'MODULE_PATHNAME' LANGUAGE C STABLE PARALLEL RESTRICTED;

-- The two rounds of cluster_health on a Citus table distributed by its
-- cluster column, as each shard runs them (README "Citus"): pass 1 of the
-- shard's clusters, then every statistic against the table's centroid set
-- (labels, n, mean_dist, mean_norm and centroids in label order).  Each
-- answers one JSON text; cluster_health calls them, users need not.
CREATE FUNCTION cluster_health_shard_centroids(
	source regclass, cluster_column name, vector_column name, order_column name)
	RETURNS text
	AS 'MODULE_PATHNAME' LANGUAGE C STABLE PARALLEL RESTRICTED;

CREATE FUNCTION cluster_health_shard(
	source regclass, cluster_column name, vector_column name, order_column name,
	labels text[], n int8[], mean_dist float8[], mean_norm float8[], centroids float8[],
	outlier_z float8, dup_cos float8, neighbours int,
	sigma_bins int, entropy_bins int, rank_max_members int,
	progress boolean, summary boolean)
	RETURNS text
	AS 'MODULE_PATHNAME' LANGUAGE C STABLE PARALLEL RESTRICTED;

-- k-means over every row of a table's vector column (NULL vectors skipped):
-- k-means++ seeds from the seeded PRNG and Lloyd, as an index build trains
-- ('ip' and 'cosine': spherical k-means on the rows' directions); on the GPU
-- worker under clustervec.gpu = auto/require when it serves, on the CPU
-- otherwise.  Every row goes to its nearest final centroid; clusters from 0.
CREATE FUNCTION kmeans(
	source regclass, vector_column name, k int, iterations int DEFAULT 10,
	seed bigint DEFAULT 0, metric text DEFAULT 'l2')
	RETURNS TABLE(tid tid, cluster int, distance float8)
	AS 'MODULE_PATHNAME' LANGUAGE C STABLE PARALLEL RESTRICTED;

-- The same clustering, one row per cluster: inertia is the sum of its rows'
-- squared L2 distances ('ip', 'cosine': of their distances).
CREATE FUNCTION kmeans_centroids(
	source regclass, vector_column name, k int, iterations int DEFAULT 10,
	seed bigint DEFAULT 0, metric text DEFAULT 'l2')
	RETURNS TABLE(cluster int, centroid cvec, members bigint, inertia float8)
	AS 'MODULE_PATHNAME' LANGUAGE C STABLE PARALLEL RESTRICTED;

CREATE TYPE cluster_stats_result AS (
	n bigint, centroid cvec, centroid_norm float8, inertia float8, cohesion float8,
	mean_norm float8, norm_cv float8, embedding_quality float8
);

CREATE FUNCTION cluster_stats_accum(double precision[], cvec) RETURNS double precision[]
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cluster_stats_combine(double precision[], double precision[])
	RETURNS double precision[]
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION cluster_stats_final(double precision[]) RETURNS cluster_stats_result
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- One pass: mean and inertia by Welford/Chan, the sum of unit vectors, norm moments.
CREATE AGGREGATE cluster_stats(cvec) (
	SFUNC = cluster_stats_accum,
	STYPE = double precision[],
	FINALFUNC = cluster_stats_final,
	COMBINEFUNC = cluster_stats_combine,
	PARALLEL = SAFE
);

-- the GPU worker --------------------------------------------------------------

CREATE FUNCTION clustervec_gpu_info(
	OUT worker_state text, OUT backend text, OUT reason text, OUT device_name text,
	OUT compute_capability text, OUT memory_total bigint, OUT memory_free bigint,
	OUT mirrors int, OUT mirror_bytes bigint, OUT gpu_requests bigint, OUT cpu_fallbacks bigint,
	OUT buffers int, OUT buffer_bytes bigint, OUT health_runs bigint, OUT index_builds bigint,
	OUT searches bigint, OUT search_launches bigint, OUT search_requests bigint,
	OUT mean_queue_wait_ms float8, OUT busy_fallbacks bigint, OUT stopped_requests bigint,
	OUT last_stop_ms float8)
	AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE FUNCTION clustervec_gpu_ping(payload_bytes int) RETURNS float8
	AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

-- Exact k-NN (L2) over the rows the caller can see; served by the GPU worker
-- under clustervec.gpu = auto/require, by the backend otherwise.
CREATE FUNCTION cvsearch_exact(source regclass, vector_column name, queries cvec[], k int)
	RETURNS TABLE(query_no int, rank int, tid tid, distance float8)
	AS 'MODULE_PATHNAME' LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

-- Batch search over a cvivf or cvlattice index: each query's k nearest visible rows among
-- its probes nearest lists (NULL: cvivf.probes), as the index scan returns
-- them; one GPU request per batch when the index is mirrored in the worker.
CREATE FUNCTION cvsearch(index regclass, queries cvec[], k int, probes int DEFAULT NULL)
	RETURNS TABLE(query_no int, rank int, tid tid, distance float8)
	AS 'MODULE_PATHNAME' LANGUAGE C STABLE CALLED ON NULL INPUT PARALLEL RESTRICTED;

-- Uploads an index's mirror to the GPU worker now (scans make one in the
-- background otherwise); true when a mirror of its current generation is ready.
CREATE FUNCTION clustervec_gpu_warm(index regclass) RETURNS bool
	AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

-- The index mirrors the GPU worker holds.
CREATE FUNCTION clustervec_gpu_mirrors()
	RETURNS TABLE(database oid, index regclass, relfilenode oid, generation bigint,
				  bytes bigint, last_used timestamptz)
	AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL SAFE;
