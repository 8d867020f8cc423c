/*
 * compat.h: every PG_VERSION_NUM shim, and nowhere else.
 */
#ifndef CV_COMPAT_H
#define CV_COMPAT_H

#include "postgres.h"

#if PG_VERSION_NUM < 150000
#define MarkGUCPrefixReserved(prefix) EmitWarningsOnPlaceholders(prefix)
#endif

#endif
