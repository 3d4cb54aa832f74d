# Spack: spack.yaml, the site overlays and topobind's recipe, checked against Spack's own
# schema and recipe data (../shared/spack), since Spack cannot be installed here.
.PHONY: spack-check spack-externals
spack-check:
	$(TOPOBIND) spack check
spack-externals:
	$(TOPOBIND) spack externals
TEST_PREREQS += spack-check
