# Benchmark of the tiled pairwise class (cv_health_pairwise), standalone cc
# build.  Include it from bench/Makefile, or run it directly:
#   make -f bench/health_pairwise.mk run-health-pairwise
# Same warning and FP flags as the extension build.  Including it does not
# change the includer's default goal.
HP_BENCH_SAVED_GOAL := $(.DEFAULT_GOAL)
HP_BENCH_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
HP_BENCH_MATH := $(HP_BENCH_DIR)/../src/math
HP_BENCH_CC ?= cc
HP_BENCH_CFLAGS = -O2 -Wall -Wextra -ffp-contract=off -Wmissing-prototypes \
	-Wdeclaration-after-statement
HP_BENCH_SRCS = $(wildcard $(HP_BENCH_MATH)/distance*.c) \
	$(wildcard $(HP_BENCH_MATH)/health_pairwise*.c) $(HP_BENCH_MATH)/health_hooks.c
HP_BENCH_HDRS = $(wildcard $(HP_BENCH_MATH)/distance*.h) \
	$(HP_BENCH_MATH)/health.h $(wildcard $(HP_BENCH_MATH)/health_pairwise*.h)
HP_BENCH_BIN = $(HP_BENCH_DIR)/health_pairwise_bench

.PHONY: run-health-pairwise clean-health-pairwise

$(HP_BENCH_BIN): $(HP_BENCH_DIR)/health_pairwise_bench.c $(HP_BENCH_SRCS) $(HP_BENCH_HDRS)
	$(HP_BENCH_CC) $(HP_BENCH_CFLAGS) -I$(HP_BENCH_MATH) -o $@ \
		$(HP_BENCH_DIR)/health_pairwise_bench.c $(HP_BENCH_SRCS) -lm

run-health-pairwise: $(HP_BENCH_BIN)
	$(HP_BENCH_BIN)

clean-health-pairwise:
	rm -f $(HP_BENCH_BIN)

.DEFAULT_GOAL := $(HP_BENCH_SAVED_GOAL)
