/*
 * scan_report.h: what EXPLAIN ANALYZE says about the index scans of one
 * statement: how many the GPU worker served, and why the others ran on the
 * CPU (scan_report.c keeps the counts of the backend's current EXPLAIN).
 */
#ifndef CV_IVF_SCAN_REPORT_H
#define CV_IVF_SCAN_REPORT_H

typedef enum CvScanOutcome
{
	CV_SCAN_GPU,				/* the mirror served it (the CPU may have continued) */
	CV_SCAN_CPU_OFF,			/* clustervec.gpu = off */
	CV_SCAN_CPU_NO_WORKER,		/* no GPU worker, or not ready */
	CV_SCAN_CPU_NO_MIRROR,		/* no mirror of the index's current generation yet */
	CV_SCAN_CPU_EMPTY,			/* built on an empty table: nothing to rank */
	CV_SCAN_CPU_LATTICE,		/* cvlattice keys the GPU does not take */
	CV_SCAN_CPU_FILLED,			/* a probed list has rows filled into freed slots */
	CV_SCAN_CPU_FAILED,			/* the worker failed the request (memory, device) */
	CV_SCAN_CPU_BUSY,			/* queued past clustervec.gpu_max_wait */
	CV_SCAN_OUTCOMES
} CvScanOutcome;

extern void cv_scan_report(CvScanOutcome outcome);

/* One answer from the worker with `candidates` rows. */
extern void cv_scan_report_answer(int candidates);

/* The CPU went on after the GPU's largest answer or a failed later one. */
extern void cv_scan_report_takeover(void);

/* Installs the EXPLAIN hook (from _PG_init). */
extern void cv_scan_report_install_hook(void);

#endif
