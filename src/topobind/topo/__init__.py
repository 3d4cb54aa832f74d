"""What the node and the job are: hwloc's topology (live, XML, synthetic), GPUs and NICs, CPU kinds,
the Slurm allocation."""
