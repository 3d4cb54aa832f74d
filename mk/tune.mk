# topobind tune (src/topobind/tune/): the tuner's own cost per run and its statistics'
# false-positive rate and power at this machine's noise (scripts/bench-tune.py).
#   make bench-tune   results/bench/tune.json
.PHONY: bench-tune

bench-tune: kernels
	$(PY) scripts/bench-tune.py

BENCH_TARGETS += bench-tune
