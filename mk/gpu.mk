# GPU- and NIC-aware placement (issue 13): the per-gpu planning benchmark.
.PHONY: bench-gpu-plan

bench-gpu-plan:
	$(PY) scripts/bench-gpu-plan.py

BENCH_TARGETS += bench-gpu-plan
