# Node acceptance (issue 20): the verdict over 1,000 generated nodes x 20 checks x 10 runs.
# Writes results/bench/fleet.json (targets: under 10 s and 1 GiB).
.PHONY: bench-fleet
bench-fleet:
	$(PY) scripts/bench-fleet.py

BENCH_TARGETS += bench-fleet
