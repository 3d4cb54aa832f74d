# `topobind run --verify` across the local cluster's nodes (issue 47): results/bench/verify-nodes.json.
#   make bench-verify-nodes   64 nodes (BENCH_VERIFY_NODES=32 for fewer); root (local-slurm)
.PHONY: bench-verify-nodes
bench-verify-nodes: kernels
	$(PY) scripts/bench-verify-nodes.py

BENCH_TARGETS += bench-verify-nodes
