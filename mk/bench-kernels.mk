# Kernels vs reference tools (issue 3): STREAM vs likwid-bench and hpcc, DGEMM vs OpenBLAS,
# HPL via topobind vs plain mpirun hpcc, latency with 4 KiB / 2 MiB / 1 GiB pages.
# Writes results/bench/kernels.json. BENCH_REPEAT=N changes the repetitions (default 5).
.PHONY: bench-kernels

bench-kernels: kernels
	$(PY) scripts/bench-kernels.py

BENCH_TARGETS += bench-kernels
