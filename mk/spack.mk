# Spack: spack.yaml, the site overlays and topobind's recipe (spack/spack_repo/topobind/),
# checked by real Spack 1.1 from $(SHARED)/spack/real, extracted once into build/spack/.
# See docs/install.md.
.PHONY: spack-check spack-externals spack-local-overlay

LOCAL_OVERLAY := site_configs/local/spack-packages.yaml

# Concretize (each overlay of this machine), install --fake, audit, info, real install;
# steps whose inputs did not change are skipped. Fails with Spack's message and a hint.
spack-check: $(LOCAL_OVERLAY)
	$(TOPOBIND) spack check

# This machine's externals (hwloc, OpenMPI, Slurm, munge, OpenBLAS, PMIx, numactl, Python).
spack-externals:
	$(TOPOBIND) spack externals

# The overlay of the 'local' site is this machine's: generated (make setup writes it too),
# never shipped, since it differs between machines (e.g. which OpenBLAS libopenblas.so is).
$(LOCAL_OVERLAY):
	$(TOPOBIND) spack externals -o $@

spack-local-overlay:
	$(TOPOBIND) spack externals -o $(LOCAL_OVERLAY)

TEST_PREREQS += spack-check
