"""Launching: job shape -> launch command (srun, mpirun, none) -> run; node groups; placement
verification."""
