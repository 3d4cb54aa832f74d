# The project's real one-node Slurm cluster on localhost (scripts/local-slurm; root only).
# State under $TOPOBIND_SLURM_DIR or build/local-slurm/. Use it from a shell with
#   eval "$(scripts/local-slurm env)"     # sets SLURM_CONF
# The tests start it themselves (tests/slurm_helpers.py), so it is not a TEST_PREREQ.
.PHONY: slurm-start slurm-stop slurm-status
slurm-start:
	scripts/local-slurm start
slurm-stop:
	scripts/local-slurm stop
slurm-status:
	scripts/local-slurm status
