/*
 * groups.h: the cvlattice build's groups of rows, one per label (private to
 * src/lattice/build.c and groups.c).  A group holds its label, its members'
 * count and their float64 sum (cosine: of their directions); list numbers
 * are given at the end, in the label type's btree order, the NULL label
 * last.
 */
#ifndef CV_LATTICE_GROUPS_H
#define CV_LATTICE_GROUPS_H

#include "lattice/lattice.h"

typedef struct CvLatticeGroup
{
	bytea	   *label;			/* the label's bytes; NULL: the NULL label */
	Datum		datum;			/* the label, an aligned copy (unused for NULL) */
	uint64		members;
	ItemPointerData last_tid;	/* the last member's heap TID */
	bool		out_of_order;	/* a member came after a later TID (a HOT chain's root) */
	int			list;			/* -1 until cvlattice_groups_number */
} CvLatticeGroup;

typedef struct CvLatticeGroups CvLatticeGroups;

extern CvLatticeGroups *cvlattice_groups_create(Relation index, const CvLatticeLabelType *type,
												int dimensions, bool directions);
extern int	cvlattice_groups_find(CvLatticeGroups *groups, Datum label, bool isnull);
extern void cvlattice_groups_add(CvLatticeGroups *groups, int group, ItemPointer tid,
								 const float *x);
extern CvLatticeGroup *cvlattice_groups_get(CvLatticeGroups *groups, int group);
extern const double *cvlattice_groups_sum(const CvLatticeGroups *groups, int group);
extern int	cvlattice_groups_number(CvLatticeGroups *groups, int **group_of_list);

#endif
