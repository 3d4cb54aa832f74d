# Node acceptance (issue 20): the verdict over 1,000 generated nodes x 20 checks x 10 runs.
# Writes results/bench/fleet.json (targets: under 10 s and 1 GiB).
.PHONY: bench-fleet
bench-fleet:
	$(PY) scripts/bench-fleet.py

BENCH_TARGETS += bench-fleet

# Quick node acceptance of the local 3-node cluster (issue 30): clean and with node3 at 25 % of
# a CPU, the checks seeing a 260 MiB LLC. Root; holds the Slurm lock. results/bench/acceptance.json.
.PHONY: bench-acceptance
bench-acceptance:
	flock /tmp/tb-slurm.lock $(PY) scripts/bench-acceptance.py

BENCH_TARGETS += bench-acceptance

# The ReFrame CI path of docs/reframe-ci.md on the local 3-node cluster (issue 30 item 5): its
# cluster.py and reframe line, then each check alone; figures within 20 %. Root; holds the Slurm
# lock. results/bench/reframe-ci.json.
.PHONY: bench-reframe-ci
bench-reframe-ci:
	flock /tmp/tb-slurm.lock $(PY) scripts/bench-reframe-ci.py

BENCH_TARGETS += bench-reframe-ci

# Node acceptance at scale (issue 39): the smoke acceptance on 8, 16, 32 local nodes (one job a
# node) and plain ReFrame --distribute=all of the same checks beside it, both at --repeat 3
# (BENCH_SCALE_REPEAT). Root; the script holds the Slurm lock one size at a time.
# BENCH_SCALE_NODES / BENCH_SCALE_REFRAME_NODES choose the sizes. results/bench/scale.{json,md}.
.PHONY: bench-scale
bench-scale:
	$(PY) scripts/bench-scale.py

BENCH_TARGETS += bench-scale
