# The architecture's baseline, for what runs on every node of a job but is built on one (a
# login node): the per-rank step (rankexec), the LD_PRELOAD shim, the SPANK plugin and the
# placement probe, and the library they all link (libtb.a). Never -march=native there: a
# compute node of an older CPU, or a QEMU guest, would die with SIGILL.
# Included by libtb/Makefile, rankstep/Makefile and kernels/Makefile (the placement probe,
# whereami); STEP_ARCH=... overrides.
TB_MACHINE := $(firstword $(subst -, ,$(shell $(CC) -dumpmachine 2>/dev/null)))
TB_BASELINE_x86_64  := -march=x86-64 -mtune=generic
TB_BASELINE_aarch64 := -march=armv8-a
STEP_ARCH ?= $(TB_BASELINE_$(TB_MACHINE))
