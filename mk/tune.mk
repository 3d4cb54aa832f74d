# topobind tune (src/topobind/tune/): the tuner's own cost per run and its statistics'
# session-wide error rates and power: 1,000 simulated sessions a condition at this
# machine's noise and a heavy-tailed one (scripts/bench-tune.py; BENCH_TUNE_SESSIONS).
#   make bench-tune   results/bench/tune.json
.PHONY: bench-tune

bench-tune: kernels
	$(PY) scripts/bench-tune.py

BENCH_TARGETS += bench-tune
