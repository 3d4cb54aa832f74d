# A multi-NUMA / multi-socket QEMU guest for placement tests (issue 19 item 5): scripts/numa-vm.
# numa-vm-setup installs QEMU, Debian's kernel and busybox-static (apt, root:
# scripts/numa-vm-apt-packages.txt) and virtme-ng
# (PyPI, pinned) into its own venv build/vng/. The guest runs this machine's userland read-only.
.PHONY: numa-vm-setup

VNG_VERSION := 1.42
VNG := build/vng/bin/vng

numa-vm-setup: $(VNG)
	@bash scripts/apt-install.sh numa-vm-setup scripts/numa-vm-apt-packages.txt

$(VNG):
	@echo "numa-vm-setup: virtme-ng $(VNG_VERSION) into build/vng/"
	python3 -m venv build/vng
	build/vng/bin/pip install -q 'virtme-ng==$(VNG_VERSION)'

TEST_PREREQS += numa-vm-setup
