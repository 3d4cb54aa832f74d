# topobind tune (src/topobind/tune/): the tuner's own cost per run and its statistics'
# session-wide error rates and power: 1,000 simulated sessions a condition at this
# machine's noise for 1 s runs, a heavy-tailed one, and this machine's for 30 ms runs
# (scripts/bench-tune.py; BENCH_TUNE_SESSIONS, BENCH_NOISE_RUNS). About 6 minutes.
#   make bench-tune   results/bench/tune.json
.PHONY: bench-tune

bench-tune: kernels
	$(PY) scripts/bench-tune.py

BENCH_TARGETS += bench-tune
