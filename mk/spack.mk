# Spack: spack.yaml, the site overlays and topobind's recipe (spack/spack_repo/topobind/),
# checked against Spack's own schema and recipe data ($(SHARED)/spack) since Spack cannot be
# installed here. See docs/install.md.
.PHONY: spack-check spack-externals spack-local-overlay

# Every check; one line per problem, fails on any error.
spack-check:
	$(TOPOBIND) spack check

# This machine's externals (hwloc, OpenMPI, Slurm, munge, OpenBLAS, PMIx, Python), printed.
spack-externals:
	$(TOPOBIND) spack externals

# Regenerate the overlay of the 'local' site from this machine, then check it.
spack-local-overlay:
	$(TOPOBIND) spack externals -o site_configs/local/spack-packages.yaml
	$(TOPOBIND) spack check site_configs/local/spack-packages.yaml

TEST_PREREQS += spack-check
