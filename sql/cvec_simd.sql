-- Every SIMD variant runs the same reduction tree, so results are identical
-- bit for bit; a variant this CPU lacks is refused when it is set.
SELECT clustervec_simd() IN ('scalar', 'avx2', 'avx512') AS known_variant;
SHOW clustervec.simd;
SET clustervec.simd = 'scalar';
SELECT clustervec_simd();
SET clustervec.simd = 'bogus';
RESET clustervec.simd;

-- pairs of equal length, 1..1100 dimensions and 16000, mixed magnitudes
CREATE TABLE simd_pairs AS
SELECT i, array_agg(x ORDER BY j)::real[]::cvec AS a, array_agg(y ORDER BY j)::real[]::cvec AS b
FROM (SELECT i, j, (random() * 2 - 1) * 10 ^ (random() * 6 - 3) AS x,
             (random() * 2 - 1) * 10 ^ (random() * 6 - 3) AS y
      FROM generate_series(1, 41) i,
           generate_series(1, CASE WHEN i = 41 THEN 16000 ELSE 1 + (i * 397) % 1100 END) j) s
GROUP BY i;

CREATE FUNCTION simd_fingerprint() RETURNS text LANGUAGE sql AS $$
	SELECT string_agg(concat_ws(',', a <-> b, a <#> b, a <=> b, a <+> b,
								vector_norm(a), l2_normalize(a) <-> b), ';' ORDER BY i)
	FROM simd_pairs
$$;

DO $$
DECLARE
	variant text;
	reference text;
	tried int := 0;
BEGIN
	PERFORM set_config('clustervec.simd', 'scalar', true);
	reference := simd_fingerprint();
	FOREACH variant IN ARRAY ARRAY['avx2', 'avx512', 'auto'] LOOP
		BEGIN
			PERFORM set_config('clustervec.simd', variant, true);
		EXCEPTION WHEN invalid_parameter_value THEN
			RAISE DEBUG 'variant % not supported here', variant;
			CONTINUE;
		END;
		tried := tried + 1;
		IF simd_fingerprint() IS DISTINCT FROM reference THEN
			RAISE EXCEPTION 'variant % differs from scalar', variant;
		END IF;
	END LOOP;
	IF tried = 0 THEN
		RAISE EXCEPTION 'no variant compared';
	END IF;
END $$;
SELECT count(*) AS pairs, sum(vector_dims(a)) > 20000 AS long_ones,
       length(simd_fingerprint()) > 41 * 5 * 10 AS fingerprint_covers_pairs
FROM simd_pairs;
DROP TABLE simd_pairs;
DROP FUNCTION simd_fingerprint();
