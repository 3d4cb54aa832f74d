# How a Makefile of this repository links libtb (see Makefile): set LIBTB_DIR (the libtb
# folder, relative to the including Makefile), include this file, then
#   compile with $(LIBTB_CPPFLAGS), link $(LIBTB) (a static archive: only the objects a
#   program calls are pulled in), and list $(LIBTB) and $(LIBTB_HDR) as prerequisites.
# LIBTB_BUILD=DIR on the command line builds and links the library in DIR (setup.py: one
# library for every C part of the wheel). Whoever asks first builds it; the others find it
# up to date (make -C libtb runs each time, and relinks a program only when libtb.a changed).
LIBTB_GOAL     := $(.DEFAULT_GOAL)
LIBTB_BUILD    ?= $(LIBTB_DIR)/build
LIBTB          := $(LIBTB_BUILD)/libtb.a
LIBTB_CPPFLAGS := -I$(LIBTB_DIR)/include
LIBTB_HDR      := $(wildcard $(LIBTB_DIR)/include/tb/*.h)
# the build folder as libtb/Makefile sees it (from its own folder)
LIBTB_BUILD_ARG = $(if $(filter $(LIBTB_DIR)/build,$(LIBTB_BUILD)),build,$(abspath $(LIBTB_BUILD)))

.PHONY: libtb-always
$(LIBTB): libtb-always
	+$(MAKE) --no-print-directory -C $(LIBTB_DIR) LIBTB_BUILD=$(LIBTB_BUILD_ARG)

# (the including Makefile's first target stays its default goal)
.DEFAULT_GOAL := $(LIBTB_GOAL)
