/*
 * settings.c: the clustervec.* settings that steer cvivf scans, and the
 * reloptions of CREATE INDEX ... USING cvivf WITH (...).
 */
#include "postgres.h"

#include "access/reloptions.h"
#include "utils/guc.h"
#include "utils/rel.h"

#include "gpu/gpu.h"
#include "ivf/ivf.h"
#include "math/calibration.h"

int			cvivf_probes = 10;
int			cv_gpu_assign_mode = CV_GPU_ASSIGN_FP32;
int			cvivf_iterative_scan = CVIVF_ITERATIVE_RELAXED;
int			cvivf_max_probes = -1;
double		cvivf_target_recall = 0;
bool		cvlattice_observe = false;

static relopt_kind cvivf_relopt_kind;

static relopt_enum_elt_def quantization_options[] = {
	{"none", CVIVF_QUANTIZATION_NONE},
	{"sq8", CVIVF_QUANTIZATION_SQ8},
	{NULL}
};

static const struct config_enum_entry iterative_scan_options[] = {
	{"off", CVIVF_ITERATIVE_OFF, false},
	{"relaxed_order", CVIVF_ITERATIVE_RELAXED, false},
	{"on", CVIVF_ITERATIVE_RELAXED, true},
	{NULL, 0, false}
};

static const struct config_enum_entry assign_options[] = {
	{"fp32", CV_GPU_ASSIGN_FP32, false},
	{"bf16", CV_GPU_ASSIGN_BF16, false},
	{NULL, 0, false}
};

/* target_recall is a fraction below 1: every list is not a recall. */
static bool
check_target_recall(double *newval, void **extra pg_attribute_unused(),
					GucSource source pg_attribute_unused())
{
	if (*newval >= 1.0)
	{
		GUC_check_errdetail("clustervec.target_recall must be at least 0 and less than 1.");
		GUC_check_errhint("Use 0 to choose probes with clustervec.probes.");
		return false;
	}
	return true;
}

/* The reloptions; registered once, when the library loads. */
static void
define_reloptions(void)
{
	cvivf_relopt_kind = add_reloption_kind();
	add_int_reloption(cvivf_relopt_kind, "lists",
					  "Number of inverted lists (0: about rows / 1000)",
					  0, 0, CVIVF_MAX_LISTS, AccessExclusiveLock);
	add_int_reloption(cvivf_relopt_kind, "iterations",
					  "Lloyd iterations of the k-means build",
					  10, 1, 1000, AccessExclusiveLock);
	add_int_reloption(cvivf_relopt_kind, "seed",
					  "Seed of the k-means++ draws: same data and seed, same centroids",
					  0, 0, INT_MAX, AccessExclusiveLock);
	add_int_reloption(cvivf_relopt_kind, "sample_rows",
					  "Rows sampled for k-means (0: 50 per list, at least 10,000)",
					  0, 0, INT_MAX, AccessExclusiveLock);
	add_enum_reloption(cvivf_relopt_kind, "quantization",
					   "Storage of each list: none, or sq8 (8-bit codes ranked first, exact distances for the few that can be results)",
					   quantization_options, CVIVF_QUANTIZATION_NONE,
					   "Valid values are \"none\" and \"sq8\".", AccessExclusiveLock);
}

void
cvivf_define_settings(void)
{
	DefineCustomEnumVariable("clustervec.gpu_assign",
							 "Products of the GPU k-means assignment in index builds.",
							 "fp32: exact FP32; bf16: tensor-core products with the best candidates re-checked in FP32.",
							 &cv_gpu_assign_mode, CV_GPU_ASSIGN_FP32, assign_options,
							 PGC_USERSET, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("clustervec.probes",
							"Number of cvivf lists a scan reads first.",
							"More probes: better recall, slower queries.",
							&cvivf_probes, 10, 1, CVIVF_MAX_LISTS,
							PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomEnumVariable("clustervec.iterative_scan",
							 "Whether a cvivf scan opens further lists while rows are wanted.",
							 "relaxed_order keeps going until clustervec.max_probes lists; "
							 "rows from lists opened later may be closer than rows already returned.",
							 &cvivf_iterative_scan, CVIVF_ITERATIVE_RELAXED,
							 iterative_scan_options, PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("clustervec.max_probes",
							"Most cvivf lists an iterative scan opens (-1: all).",
							NULL, &cvivf_max_probes, -1, -1, CVIVF_MAX_LISTS,
							PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomRealVariable("clustervec.target_recall",
							 "Recall@10 a cvivf scan aims for, choosing its probes from the index's calibration (0: off).",
							 "Overrides clustervec.probes on calibrated cvivf indexes; clustervec.max_probes caps it.",
							 &cvivf_target_recall, 0, 0, 1,
							 PGC_USERSET, 0, check_target_recall, NULL, NULL);
	DefineCustomBoolVariable("clustervec.observe",
							 "Whether GPU searches over cvlattice indexes observe the clusters' health.",
							 "Each list a search probes has its members' distances to their centroid "
							 "recorded once per mirror; cluster_health_observed() reports them.",
							 &cvlattice_observe, false, PGC_USERSET, 0, NULL, NULL, NULL);
	define_reloptions();
}

/* How many of lists a scan may open in all under the current settings. */
int
cvivf_scan_limit(int lists)
{
	return cvivf_scan_limit_for(lists, cvivf_probes);
}

/* The same for a scan that reads probes lists first. */
int
cvivf_scan_limit_for(int lists, int probes)
{
	if (cvivf_iterative_scan == CVIVF_ITERATIVE_OFF)
		return Min(probes, lists);
	if (cvivf_max_probes < 0)
		return lists;
	return Min(Max(cvivf_max_probes, probes), lists);
}

/* Says once per index and session that target_recall has no calibration to read. */
static void
notice_uncalibrated(Relation index)
{
	static Oid	noticed = InvalidOid;

	if (noticed == RelationGetRelid(index))
		return;
	noticed = RelationGetRelid(index);
	ereport(NOTICE,
			(errmsg("index \"%s\" has no recall calibration, so clustervec.target_recall falls back to clustervec.probes",
					RelationGetRelationName(index)),
			 errhint("Run SELECT cvivf_calibrate('%s').",
					 RelationGetRelationName(index))));
}

/*
 * The lists a cvivf scan reads first: clustervec.probes, or with
 * clustervec.target_recall the smallest probes the index's calibration
 * says reach it, at most clustervec.max_probes.  A cvlattice index has one
 * once cvivf_calibrate measured it (its build does not); its label-keyed
 * scans read their labels' lists whatever the probes.
 */
int
cvivf_scan_probes(Relation index, const CvIvfMetaPageData *meta)
{
	const CvIvfCalibration *c = &meta->calibration;
	int			probes;

	if (cvivf_target_recall <= 0 ||
		(meta->flags & CVIVF_META_NO_CENTROIDS) || meta->lists <= 1)
		return cvivf_probes;
	probes = (int) cv_calibration_probes(c->probes, c->recall, (int) c->points,
										 cvivf_target_recall);
	if (probes == 0)
	{
		notice_uncalibrated(index);
		return cvivf_probes;
	}
	if (cvivf_max_probes >= 0)
		probes = Min(probes, Max(cvivf_max_probes, 1));
	return probes;
}

bytea *
cvivfoptions(Datum reloptions, bool validate)
{
	static const relopt_parse_elt table[] = {
		{"lists", RELOPT_TYPE_INT, offsetof(CvIvfOptions, lists)},
		{"iterations", RELOPT_TYPE_INT, offsetof(CvIvfOptions, iterations)},
		{"seed", RELOPT_TYPE_INT, offsetof(CvIvfOptions, seed)},
		{"sample_rows", RELOPT_TYPE_INT, offsetof(CvIvfOptions, sample_rows)},
		{"quantization", RELOPT_TYPE_ENUM, offsetof(CvIvfOptions, quantization)},
	};

	return (bytea *) build_reloptions(reloptions, validate, cvivf_relopt_kind,
									  sizeof(CvIvfOptions), table, lengthof(table));
}
