# Kernels vs reference tools (issue 3): STREAM vs likwid-bench and hpcc, DGEMM vs OpenBLAS,
# HPL via topobind vs plain mpirun hpcc, latency with 4 KiB / 2 MiB / 1 GiB pages.
# Writes results/bench/kernels.json. BENCH_REPEAT=N changes the repetitions (default 5).
.PHONY: bench-kernels

bench-kernels: kernels
	$(PY) scripts/bench-kernels.py

BENCH_TARGETS += bench-kernels

# Hugepages for programs topobind does not build (issue 12): the LD_PRELOAD shim against
# glibc's GLIBC_TUNABLES=glibc.malloc.hugetlb, on HPL (hpcc) and a malloc'd DGEMM.
# Writes results/bench/hugetlb.json (root: it reserves and restores the hugepage pools).
.PHONY: bench-hugetlb
bench-hugetlb: kernels
	$(PY) scripts/bench-hugetlb.py -o results/bench/hugetlb.json

BENCH_TARGETS += bench-hugetlb
