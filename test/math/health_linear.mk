# health_linear.mk: the linear-class statistics test (sections 1, 2 and 4 of
# STATISTICS.md, and the column names), no PostgreSQL needed.  Included by
# test/math/Makefile; standalone: make -f health_linear.mk run-health-linear
#
# health_centroid.c, health_twomeans.c and health_hooks.c (where their
# scratch comes from) are compiled with
# -Dmalloc=cv_test_malloc so the test can make their scratch allocation fail
# and check the fallback paths; the test itself is built without it.
HEALTH_LINEAR_DIR := $(dir $(lastword $(MAKEFILE_LIST)))
HEALTH_LINEAR_MATH := $(HEALTH_LINEAR_DIR)../../src/math
HEALTH_LINEAR_CFLAGS = -O2 -Wall -Wextra -ffp-contract=off -Wmissing-prototypes \
	-Wdeclaration-after-statement -I$(HEALTH_LINEAR_DIR)../../src
HEALTH_LINEAR_HOOKED = $(HEALTH_LINEAR_MATH)/health_centroid.c \
	$(HEALTH_LINEAR_MATH)/health_twomeans.c $(HEALTH_LINEAR_MATH)/health_hooks.c
HEALTH_LINEAR_PLAIN = $(HEALTH_LINEAR_MATH)/health_potential.c \
	$(HEALTH_LINEAR_MATH)/health_names.c
HEALTH_LINEAR_BIN = $(HEALTH_LINEAR_DIR)test_health_linear

.PHONY: run-health-linear clean-health-linear

$(HEALTH_LINEAR_BIN): $(HEALTH_LINEAR_DIR)test_health_linear.c $(HEALTH_LINEAR_HOOKED) \
		$(HEALTH_LINEAR_PLAIN) $(HEALTH_LINEAR_MATH)/health.h
	set -e; objs=""; \
	for src in $(HEALTH_LINEAR_HOOKED); do \
		obj=$@.$$(basename $$src .c).o; \
		$(CC) $(HEALTH_LINEAR_CFLAGS) -Dmalloc=cv_test_malloc -c $$src -o $$obj; \
		objs="$$objs $$obj"; \
	done; \
	$(CC) $(HEALTH_LINEAR_CFLAGS) -o $@ $(HEALTH_LINEAR_DIR)test_health_linear.c \
		$(HEALTH_LINEAR_PLAIN) $$objs -lm; \
	rm -f $$objs

run-health-linear: $(HEALTH_LINEAR_BIN)
	$(HEALTH_LINEAR_BIN)

clean-health-linear:
	rm -f $(HEALTH_LINEAR_BIN)
