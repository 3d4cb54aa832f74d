# The rank step (rankstep/, see rankstep/README.md): what runs on each rank before the user's
# program, built for the architecture's baseline. Binaries land in rankstep/bin/.
#   make rankstep   rankexec (the per-rank step of 'topobind run') and the hugepage shim
#                   libtbhugepages.so; 'make kernels' builds it too (topobind run needs it)
#   make spank      the Slurm SPANK plugin rankstep/bin/topobind_spank.so: built where
#                   slurm/spank.h exists (Debian: libslurm-dev, in scripts/apt-packages.txt).
#                   SPANK=1 scripts/local-slurm start adds it to the local cluster's plugstack.conf.
.PHONY: rankstep rankstep-install rankstep-clean spank spank-clean bench-spank spank-option \
        bench-rankstep
SPANK_HEADER := $(wildcard /usr/include/slurm/spank.h)

rankstep: libtb
	$(MAKE) -C rankstep

rankstep-install: rankstep
	$(MAKE) -C rankstep install

rankstep-clean: libtb-clean
	$(MAKE) -C rankstep clean

TEST_PREREQS += rankstep

spank:
	$(MAKE) -C rankstep spank

# The plugin's --topobind option parser alone (no Slurm headers needed), for its property test.
spank-option:
	$(MAKE) -C rankstep spank-option

TEST_PREREQS += spank-option

spank-clean:
	rm -f rankstep/bin/topobind_spank.so rankstep/bin/tb-spank-option

# The per-rank step (rankstep/bin/rankexec) against a bare exec: results/bench/rankstep.json.
bench-rankstep: kernels
	$(PY) scripts/bench-rankstep.py

BENCH_TARGETS += bench-rankstep

# What the plugin adds per task against a plain srun step: results/bench/spank.json.
bench-spank: kernels spank
	$(PY) scripts/bench-spank.py

ifneq ($(SPANK_HEADER),)
TEST_PREREQS += spank
BENCH_TARGETS += bench-spank
endif
