# Kernels (C11 + OpenMP): STREAM, DGEMM, latency, c2c, whereami.
# Binaries land in kernels/bin/ (see kernels/Makefile; CC, CFLAGS, PREFIX are passed through).
# 'make kernels' also builds the rank step (rankstep/, mk/rankstep.mk): rankexec and the
# hugepage shim, which 'topobind run' and 'topobind bench --pages' need beside the kernels.
.PHONY: kernels kernels-clean kernels-install

kernels: rankstep
	$(MAKE) -C kernels

kernels-install: kernels rankstep-install
	$(MAKE) -C kernels install

kernels-clean: rankstep-clean
	$(MAKE) -C kernels clean

TEST_PREREQS += kernels
