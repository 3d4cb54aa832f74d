# Spack: spack.yaml, the site overlays and topobind's recipe (spack/spack_repo/topobind/),
# checked by real Spack 1.1 from the offline mirror's spack/real ($(SHARED)), extracted once
# into build/spack/. Without the mirror the check is skipped with one line (CI sets
# TOPOBIND_REQUIRE_MIRROR=1 and fails instead). See docs/install.md.
.PHONY: spack-check spack-externals spack-local-overlay

LOCAL_OVERLAY := site_configs/local/spack-packages.yaml

# Concretize (each overlay of this machine), install --fake, audit, info, real install;
# steps whose inputs did not change are skipped. Fails with Spack's message and a hint.
spack-check: $(LOCAL_OVERLAY)
	@if [ -x build/flux/bin/flux ] && ! grep -q '^  flux-core:' $(LOCAL_OVERLAY); then \
	  echo "spack-check: $(LOCAL_OVERLAY) again: 'make flux' built flux-core (topobind +flux)"; \
	  $(TOPOBIND) spack externals -o $(LOCAL_OVERLAY); fi
	@if [ -d "$(SHARED)/spack/real" ] || [ -n "$$TOPOBIND_REQUIRE_MIRROR" ]; then \
	  $(TOPOBIND) spack check; \
	else echo "spack-check: skipped: no offline mirror at $(SHARED) (set TOPOBIND_OFFLINE_MIRROR; docs/install.md says where to get the Spack archives)"; fi

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
