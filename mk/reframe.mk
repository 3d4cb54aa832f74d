# ReFrame checks per site (issue 5): calibrate this machine's references, validate it, and the
# last step of 'make demo'. See docs/site-admins.md and docs/reframe-ci.md.
.PHONY: calibrate-local validate-local demo-validate

LOCAL_REFERENCES := site_configs/local/references.yaml

# This machine's references, measured once (run 'make calibrate-local' to measure again).
$(LOCAL_REFERENCES): | kernels
	$(TOPOBIND) calibrate --site local --repeat 3

calibrate-local: kernels
	$(TOPOBIND) calibrate --site local --repeat 3

# The quick set (under 5 minutes on 2 cores); a figure disturbed by a neighbouring process is
# measured again up to twice (reframe --max-retries), a real regression fails every attempt.
validate-local: kernels | $(LOCAL_REFERENCES)
	$(TOPOBIND) validate --site local --tags quick --retries 2

# The demo's final step: it waits for every other demo step (secondary expansion reads
# DEMO_STEPS after all mk/*.mk fragments have added to it).
.SECONDEXPANSION:
demo-validate: $$(filter-out demo-validate,$$(DEMO_STEPS)) validate-local

DEMO_STEPS += demo-validate
