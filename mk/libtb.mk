# The C library at the bottom (libtb/, libtb/README.md): libtb/build/libtb.a, built once, for
# the architecture's baseline, and linked by everything in rankstep/ and kernels/ (their
# Makefiles run 'make -C libtb' first, so 'make rankstep' or 'make kernels' alone builds it).
#   make libtb        the library alone
#   make libtb-clean  its objects and archive ('make kernels-clean' and 'rankstep-clean' too)
.PHONY: libtb libtb-clean

libtb:
	$(MAKE) -C libtb

libtb-clean:
	$(MAKE) -C libtb clean
