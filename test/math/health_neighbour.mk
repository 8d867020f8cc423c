# Standalone unit tests of the neighbour family and effective_rank
# (STATISTICS.md sections 5 and 6); no PostgreSQL needed.  Included from
# test/math/Makefile; the defaults below let it run alone too:
#   make -f health_neighbour.mk run-health-neighbour run-health-rank
# `./test_health_neighbour --time` and `./test_health_rank --time` time the
# preparation at k = 1,000 and 10,000 and the rank at n = 2,000, d = 1,024.
# Each test includes its module's .c (to reach the static SIMD variants), so
# the module is a prerequisite but not a separate source on the command line.
CC ?= cc
CFLAGS ?= -O2 -Wall -Wextra -ffp-contract=off -Wmissing-prototypes \
	-Wdeclaration-after-statement
MATH ?= ../../src/math

.PHONY: run-health-neighbour run-health-rank

test_health_neighbour: test_health_neighbour.c $(MATH)/health_neighbour.c $(MATH)/health_hooks.c \
		$(MATH)/health.h
	$(CC) $(CFLAGS) -I$(MATH) -o $@ test_health_neighbour.c $(MATH)/health_hooks.c -lm

test_health_rank: test_health_rank.c $(MATH)/health_rank.c $(MATH)/health_hooks.c $(MATH)/health.h
	$(CC) $(CFLAGS) -I$(MATH) -o $@ test_health_rank.c $(MATH)/health_hooks.c -lm

run-health-neighbour: test_health_neighbour
	./test_health_neighbour

run-health-rank: test_health_rank
	./test_health_rank
