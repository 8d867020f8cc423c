# Benchmark of the CPU reference of the 38 cluster statistics (every family
# of src/math/health.h, in the order cluster_health calls them), standalone
# cc build.  Run it from the repository root or from bench/:
#   make -f bench/health.mk run-health
#   make -C bench -f health.mk run-health
# Arguments for the binary (configs KxN, e.g. 1000x100) go in HEALTH_ARGS.
# Same warning and FP flags as the extension build.
HB_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
HB_SRC := $(HB_DIR)/../src
HB_CC ?= cc
HB_CFLAGS = -O2 -Wall -Wextra -ffp-contract=off -Wmissing-prototypes \
	-Wdeclaration-after-statement
HB_SRCS = $(sort $(wildcard $(HB_SRC)/math/*.c))
HB_HDRS = $(wildcard $(HB_SRC)/math/*.h)
HB_BIN = $(HB_DIR)/health_bench
HEALTH_ARGS ?=

.PHONY: run-health clean-health

$(HB_BIN): $(HB_DIR)/health_bench.c $(HB_SRCS) $(HB_HDRS)
	$(HB_CC) $(HB_CFLAGS) -I$(HB_SRC) -o $@ $(HB_DIR)/health_bench.c $(HB_SRCS) -lm

run-health: $(HB_BIN)
	$(HB_BIN) $(HEALTH_ARGS)

clean-health:
	rm -f $(HB_BIN)
