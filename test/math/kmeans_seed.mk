# kmeans_seed.mk: the test of cv_kmeans_seed_with (k-means++ seeding with
# the caller's refresh callback, for a GPU), no PostgreSQL needed.  Included
# by test/math/Makefile; standalone: make -f kmeans_seed.mk run-kmeans-seed
KMEANS_SEED_DIR := $(dir $(lastword $(MAKEFILE_LIST)))
KMEANS_SEED_MATH := $(KMEANS_SEED_DIR)../../src/math
KMEANS_SEED_CFLAGS = -O2 -Wall -Wextra -ffp-contract=off -Wmissing-prototypes \
	-Wdeclaration-after-statement -I$(KMEANS_SEED_MATH)
KMEANS_SEED_SRCS = $(wildcard $(KMEANS_SEED_MATH)/distance*.c) $(KMEANS_SEED_MATH)/prng.c \
	$(KMEANS_SEED_MATH)/kmeans.c $(wildcard $(KMEANS_SEED_MATH)/nearest*.c)
KMEANS_SEED_BIN = $(KMEANS_SEED_DIR)test_kmeans_seed

.PHONY: run-kmeans-seed clean-kmeans-seed

$(KMEANS_SEED_BIN): $(KMEANS_SEED_DIR)test_kmeans_seed.c $(KMEANS_SEED_SRCS) \
		$(wildcard $(KMEANS_SEED_MATH)/*.h)
	$(CC) $(KMEANS_SEED_CFLAGS) -o $@ $(KMEANS_SEED_DIR)test_kmeans_seed.c \
		$(KMEANS_SEED_SRCS) -lm

run-kmeans-seed: $(KMEANS_SEED_BIN)
	$(KMEANS_SEED_BIN)

clean-kmeans-seed:
	rm -f $(KMEANS_SEED_BIN)
