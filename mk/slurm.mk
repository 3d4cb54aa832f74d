# The project's real local Slurm cluster (scripts/local-slurm; root only): one node, or up to
# 64 nodes with NODES=N (each slurmd in its own network/UTS/mount namespace on this machine).
# State under $TOPOBIND_SLURM_DIR or build/local-slurm/. Use it from a shell with
#   eval "$(scripts/local-slurm env)"     # sets SLURM_CONF
# The tests start it themselves (tests/slurm_helpers.py), so it is not a TEST_PREREQ.
.PHONY: slurm-start slurm-stop slurm-status
NODES ?= 1
slurm-start:
	scripts/local-slurm start --nodes $(NODES)
slurm-stop:
	scripts/local-slurm stop
slurm-status:
	scripts/local-slurm status
