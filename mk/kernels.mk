# Kernels (C11 + OpenMP): STREAM, DGEMM, latency, c2c, whereami, hugepage LD_PRELOAD shim.
# Binaries land in kernels/bin/ (see kernels/Makefile; CC, CFLAGS, PREFIX are passed through).
.PHONY: kernels kernels-clean kernels-install

kernels:
	$(MAKE) -C kernels

kernels-install: kernels
	$(MAKE) -C kernels install

kernels-clean:
	$(MAKE) -C kernels clean

TEST_PREREQS += kernels

# The per-rank step (kernels/bin/rankexec) against a bare exec: results/bench/rankstep.json.
.PHONY: bench-rankstep
bench-rankstep: kernels
	$(PY) scripts/bench-rankstep.py

BENCH_TARGETS += bench-rankstep
