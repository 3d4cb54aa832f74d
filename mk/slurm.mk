# The project's one-node Slurm cluster on localhost (scripts/local-slurm).
.PHONY: slurm-start slurm-stop slurm-status
slurm-start:
	scripts/local-slurm start
slurm-stop:
	scripts/local-slurm stop
slurm-status:
	scripts/local-slurm status
