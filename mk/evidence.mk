# The evidence around every measured run (issue 45; libtb/include/tb/evidence.h): its cost per
# run (tb-evidence --loop: begin + end + JSON) and on a STREAM run with and without
# (TOPOBIND_EVIDENCE=0). Writes results/bench/evidence.json; targets: 5 ms a run, 1 % of STREAM.
.PHONY: bench-evidence

bench-evidence: kernels
	$(PY) scripts/bench-evidence.py

BENCH_TARGETS += bench-evidence

# The same on a whole smoke acceptance of 32 local nodes, evidence off and on alternately
# (scripts/bench-evidence-fleet.py; root: a local Slurm cluster). Target: at most 5 % slower.
.PHONY: bench-evidence-fleet

bench-evidence-fleet: kernels
	$(PY) scripts/bench-evidence-fleet.py

BENCH_TARGETS += bench-evidence-fleet
