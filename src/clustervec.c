/*
 * clustervec.c: module load.  Settings are defined here, always; later
 * issues add the GPU worker's registration when the module is preloaded.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "compat.h"
#include "gpu/gpu.h"
#include "ivf/ivf.h"
#include "ivf/scan_report.h"
#include "math/distance.h"

PG_MODULE_MAGIC;

void		_PG_init(void);
extern void cv_health_define_settings(void);

#define CV_SIMD_AUTO (-1)

static int	cv_simd_setting = CV_SIMD_AUTO;

static const struct config_enum_entry simd_options[] = {
	{"auto", CV_SIMD_AUTO, false},
	{"scalar", CV_SIMD_SCALAR, false},
	{"avx2", CV_SIMD_AVX2, false},
	{"avx512", CV_SIMD_AVX512, false},
	{NULL, 0, false}
};

PG_FUNCTION_INFO_V1(clustervec_simd);

/* A forced variant this CPU cannot run is refused when it is set, not later. */
static bool
check_simd(int *newval, void **extra pg_attribute_unused(),
		   GucSource source pg_attribute_unused())
{
	if (*newval == CV_SIMD_AUTO || cv_simd_supported((CvSimdLevel) *newval))
		return true;
	GUC_check_errdetail("This CPU does not support the \"%s\" distance kernels.",
						*newval == CV_SIMD_AVX2 ? "avx2" : "avx512");
	GUC_check_errhint("Use \"auto\" to pick the fastest variant this CPU supports.");
	return false;
}

static void
assign_simd(int newval, void *extra pg_attribute_unused())
{
	cv_simd_use(newval == CV_SIMD_AUTO ? cv_simd_best() : (CvSimdLevel) newval);
}

static void
define_settings(void)
{
	DefineCustomEnumVariable("clustervec.simd",
							 "CPU distance kernels: auto picks the fastest this CPU supports.",
							 "Forcing scalar, avx2 or avx512 exists for testing; results are identical.",
							 &cv_simd_setting, CV_SIMD_AUTO, simd_options,
							 PGC_USERSET, 0, check_simd, assign_simd, NULL);
}

void
_PG_init(void)
{
	define_settings();
	cvivf_define_settings();
	cv_health_define_settings();
	cv_gpu_define_settings();
	cv_scan_report_install_hook();
	if (process_shared_preload_libraries_in_progress)
	{
		cv_gpu_preload();
		cv_gpu_install_hooks();
	}
	MarkGUCPrefixReserved("clustervec");
}

/* The distance kernels in use, e.g. "avx512": what "auto" chose. */
Datum
clustervec_simd(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(cv_distance->name));
}
