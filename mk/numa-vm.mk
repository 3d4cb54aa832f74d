# A multi-NUMA / multi-socket QEMU guest for placement tests (issue 19 item 5): scripts/numa-vm.
# numa-vm-setup installs QEMU, Debian's kernel and busybox-static (apt, root) and virtme-ng
# (PyPI, pinned) into its own venv build/vng/. The guest runs this machine's userland read-only.
.PHONY: numa-vm-setup

NUMA_VM_APT := qemu-system-x86 linux-image-amd64 busybox-static
VNG_VERSION := 1.42
VNG := build/vng/bin/vng

numa-vm-setup: $(VNG)
	@missing=$$(for p in $(NUMA_VM_APT); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" -ne 0 ]; then \
	    echo "numa-vm-setup: error: Debian packages missing: $$missing; run 'sudo make numa-vm-setup'" >&2; \
	    exit 2; \
	  fi; \
	  echo "numa-vm-setup: apt-get install $$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get -o DPkg::Lock::Timeout=900 update -q >/dev/null && \
	  apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends $$missing >/dev/null \
	  || exit $$?; \
	fi

$(VNG):
	@echo "numa-vm-setup: virtme-ng $(VNG_VERSION) into build/vng/"
	python3 -m venv build/vng
	build/vng/bin/pip install -q 'virtme-ng==$(VNG_VERSION)'

TEST_PREREQS += numa-vm-setup
