# Unit test of the tiled pairwise class (cv_health_pairwise), standalone cc
# build (no PostgreSQL needed).  Include it from test/math/Makefile, or run
# it directly:
#   make -f test/math/health_pairwise.mk run-health-pairwise
# Same warning and FP flags as the extension build.  Including it does not
# change the includer's default goal.
HP_TEST_SAVED_GOAL := $(.DEFAULT_GOAL)
HP_TEST_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
HP_TEST_MATH := $(HP_TEST_DIR)/../../src/math
HP_TEST_CC ?= cc
HP_TEST_CFLAGS = -O2 -Wall -Wextra -ffp-contract=off -Wmissing-prototypes \
	-Wdeclaration-after-statement
HP_TEST_SRCS = $(wildcard $(HP_TEST_MATH)/distance*.c) \
	$(wildcard $(HP_TEST_MATH)/health_pairwise*.c) $(HP_TEST_MATH)/health_hooks.c
HP_TEST_HDRS = $(wildcard $(HP_TEST_MATH)/distance*.h) \
	$(HP_TEST_MATH)/health.h $(wildcard $(HP_TEST_MATH)/health_pairwise*.h)
HP_TEST_BIN = $(HP_TEST_DIR)/test_health_pairwise

.PHONY: run-health-pairwise clean-health-pairwise

$(HP_TEST_BIN): $(HP_TEST_DIR)/test_health_pairwise.c $(HP_TEST_SRCS) $(HP_TEST_HDRS)
	$(HP_TEST_CC) $(HP_TEST_CFLAGS) -I$(HP_TEST_MATH) -o $@ \
		$(HP_TEST_DIR)/test_health_pairwise.c $(HP_TEST_SRCS) -lm

run-health-pairwise: $(HP_TEST_BIN)
	$(HP_TEST_BIN)

clean-health-pairwise:
	rm -f $(HP_TEST_BIN)

.DEFAULT_GOAL := $(HP_TEST_SAVED_GOAL)
