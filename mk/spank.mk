# The Slurm SPANK plugin (launchers/spank/topobind_spank.so): built where slurm/spank.h exists
# (Debian: libslurm-dev, in scripts/apt-packages.txt). SPANK=1 scripts/local-slurm start adds it
# to the local cluster's plugstack.conf.
.PHONY: spank spank-clean bench-spank spank-option
SPANK_HEADER := $(wildcard /usr/include/slurm/spank.h)

spank:
	$(MAKE) -C launchers/spank

# The plugin's --topobind option parser alone (no Slurm headers needed), for its property test.
spank-option:
	$(MAKE) -C launchers/spank tb-spank-option

TEST_PREREQS += spank-option

spank-clean:
	$(MAKE) -C launchers/spank clean

# What the plugin adds per task against a plain srun step: results/bench/spank.json.
bench-spank: kernels spank
	$(PY) scripts/bench-spank.py

ifneq ($(SPANK_HEADER),)
TEST_PREREQS += spank
BENCH_TARGETS += bench-spank
endif
