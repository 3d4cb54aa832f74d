# Memory placement and page size of the user's program (issue 19): two plain user programs
# (userprogs/triad.c, userprogs/chase.c: no topobind code) run through
# 'topobind run --pages 4k|2M|1G'. Writes results/bench/memory.json (root: it reserves the
# hugepage pools and gives them back). BENCH_REPEAT=N changes the repetitions (default 5).
.PHONY: bench-memory userprogs

userprogs/bin/triad: userprogs/triad.c
	@mkdir -p userprogs/bin
	cc -std=c11 -O2 -Wall -Wextra -fopenmp $< -o $@

userprogs/bin/chase: userprogs/chase.c
	@mkdir -p userprogs/bin
	cc -std=c11 -O2 -Wall -Wextra $< -o $@

userprogs: userprogs/bin/triad userprogs/bin/chase

bench-memory: kernels userprogs
	$(PY) scripts/bench-memory.py -o results/bench/memory.json

BENCH_TARGETS += bench-memory
