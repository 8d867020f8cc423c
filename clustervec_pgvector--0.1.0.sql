-- clustervec_pgvector: cvivf and cvlattice over pgvector's vector type.
--
-- vector and cvec have one layout (varlena header, int16 dimensions, int16
-- unused, float4 elements), so every function here is clustervec's own C
-- function, declared on vector.  Only the metrics the access methods have:
-- L2 (<->), negative inner product (<#>) and cosine (<=>); none for L1 (<+>).

\echo Use "CREATE EXTENSION clustervec_pgvector" to load this file. \quit

-- casts ------------------------------------------------------------------------
-- cvec -> vector keeps the bytes: a cvec always has 1 to 16,000 finite
-- elements and unused 0, as pgvector requires.  vector -> cvec keeps the
-- bytes too but checks each value: pgvector before 0.4.4 took NaN and
-- infinity in binary input (and before 0.4.0 arithmetic overflowed to
-- infinity), and tables keep such values across upgrades; a cast without a
-- function would let them into cvec, whose every distance and statistic
-- assumes finite elements.

CREATE FUNCTION cvec(vector, integer, boolean) RETURNS cvec
	AS 'MODULE_PATHNAME', 'cvec_from_layout' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE CAST (vector AS cvec) WITH FUNCTION cvec(vector, integer, boolean) AS ASSIGNMENT;
CREATE CAST (cvec AS vector) WITHOUT FUNCTION AS ASSIGNMENT;

-- distances as the index computes them ------------------------------------------
-- float64 sums, bit for bit cvec's <->, <#> and <=>: the values a cvivf or
-- cvlattice index on a vector column orders by (pgvector's own operators sum
-- in float4, so theirs may differ in the last digits).  Support function 1
-- of the operator classes below: the access methods know the metric by it.

CREATE FUNCTION cvec_l2_distance(vector, vector) RETURNS float8
	AS 'MODULE_PATHNAME', 'cvec_l2_distance' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE COST 20;
CREATE FUNCTION cvec_negative_inner_product(vector, vector) RETURNS float8
	AS 'MODULE_PATHNAME', 'cvec_negative_inner_product' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE COST 20;
CREATE FUNCTION cvec_cosine_distance(vector, vector) RETURNS float8
	AS 'MODULE_PATHNAME', 'cvec_cosine_distance' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE COST 20;

-- cvivf -------------------------------------------------------------------------
-- CREATE INDEX ON items USING cvivf (embedding vector_l2_ops): operator class
-- names are per access method, so these do not clash with pgvector's.

CREATE OPERATOR CLASS vector_l2_ops
	DEFAULT FOR TYPE vector USING cvivf AS
	OPERATOR 1 <-> (vector, vector) FOR ORDER BY float_ops,
	FUNCTION 1 cvec_l2_distance(vector, vector);

CREATE OPERATOR CLASS vector_ip_ops
	FOR TYPE vector USING cvivf AS
	OPERATOR 1 <#> (vector, vector) FOR ORDER BY float_ops,
	FUNCTION 1 cvec_negative_inner_product(vector, vector);

CREATE OPERATOR CLASS vector_cosine_ops
	FOR TYPE vector USING cvivf AS
	OPERATOR 1 <=> (vector, vector) FOR ORDER BY float_ops,
	FUNCTION 1 cvec_cosine_distance(vector, vector);

-- cvlattice: the vector column (the label column takes clustervec's label classes)

CREATE OPERATOR CLASS vector_l2_ops
	DEFAULT FOR TYPE vector USING cvlattice AS
	OPERATOR 1 <-> (vector, vector) FOR ORDER BY float_ops,
	FUNCTION 1 cvec_l2_distance(vector, vector);

CREATE OPERATOR CLASS vector_ip_ops
	FOR TYPE vector USING cvlattice AS
	OPERATOR 1 <#> (vector, vector) FOR ORDER BY float_ops,
	FUNCTION 1 cvec_negative_inner_product(vector, vector);

CREATE OPERATOR CLASS vector_cosine_ops
	FOR TYPE vector USING cvlattice AS
	OPERATOR 1 <=> (vector, vector) FOR ORDER BY float_ops,
	FUNCTION 1 cvec_cosine_distance(vector, vector);

-- cluster_stats over a vector column -------------------------------------------
-- The same transition function: it checks each member of a type other than cvec.

CREATE FUNCTION cluster_stats_accum(double precision[], vector) RETURNS double precision[]
	AS 'MODULE_PATHNAME', 'cluster_stats_accum' LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE AGGREGATE cluster_stats(vector) (
	SFUNC = cluster_stats_accum,
	STYPE = double precision[],
	FINALFUNC = cluster_stats_final,
	COMBINEFUNC = cluster_stats_combine,
	PARALLEL = SAFE
);
