# ReFrame checks per site (issue 5): calibrate this machine's references, validate it, and the
# last step of 'make demo'. See docs/site-admins.md and docs/reframe-ci.md.
.PHONY: calibrate-local validate-local demo-validate

# This machine's references: generated here (never shipped: site_configs/local/.gitignore).
LOCAL_REFERENCES := site_configs/local/references.yaml

calibrate-local: kernels
	$(TOPOBIND) calibrate --site local --repeat 3

# The quick set (under 5 minutes on 2 cores) against this machine's references; calibrates
# first when there are none or they were measured on another host (a copied checkout). A
# figure disturbed by a neighbouring process is measured again up to twice (reframe
# --max-retries); a real regression fails every attempt.
validate-local: kernels
	@if ! grep -qx "  host: $$(hostname)" $(LOCAL_REFERENCES) 2>/dev/null; then \
	  echo "== no references of this host in $(LOCAL_REFERENCES): calibrating first"; \
	  $(TOPOBIND) calibrate --site local --repeat 3 || exit $$?; \
	fi
	$(TOPOBIND) validate --site local --tags quick --retries 2

# The demo's validation: calibrate this node (two sessions of the quick set at small sizes,
# wide tolerances: the demo shows the machinery, not a verdict on the node) into a copy of the
# local site under results/demo/, then validate it against what was just measured: 44 s on
# the project's 2-core VM with other processes using 0.74 of its CPUs, 101 s with 1.57. It
# prints its duration and the load. It fails when a check's sanity fails
# (wrong binding, invalid result, a kernel or ReFrame that does not run), not because the
# machine is slower than another one or busy: validate --judge sanity shows each figure
# against its reference but leaves the performance verdict to a plain 'validate'.
DEMO_DIR := results/demo
DEMO_SMALL := -S elements=8M -S trials=10 -S n=512 -S reps=10 -S sizes=16K,1M -S quick_n=960 \
              -S samples=3

# The demo's final step: it waits for every other demo step (secondary expansion reads
# DEMO_STEPS after all mk/*.mk fragments have added to it).
.SECONDEXPANSION:
demo-validate: $$(filter-out demo-validate,$$(DEMO_STEPS)) kernels
	@rm -rf $(DEMO_DIR)/sites && mkdir -p $(DEMO_DIR)/sites
	@cp -r site_configs/local $(DEMO_DIR)/sites/ && rm -f $(DEMO_DIR)/sites/local/references.yaml
	@echo "== calibrate this node, then validate it against what was measured ($(DEMO_DIR)/)"
	@start=$$(date +%s); export TOPOBIND_SITES_DIR=$(CURDIR)/$(DEMO_DIR)/sites; \
	$(TOPOBIND) calibrate --site local --repeat 2 --min-tolerance 1.0 \
	  --results $(DEMO_DIR)/reframe $(DEMO_SMALL) \
	&& $(TOPOBIND) validate --site local --tags quick --retries 2 --judge sanity \
	  --results $(DEMO_DIR)/reframe; \
	rc=$$?; echo "== demo validation (calibrate + validate): $$(( $$(date +%s) - start )) s"; \
	exit $$rc

DEMO_STEPS += demo-validate
