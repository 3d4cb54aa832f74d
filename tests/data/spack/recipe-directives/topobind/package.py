# Broken on purpose: a misspelt variant, package and dependency type; a when= naming a
# variant topobind does not have; a version with no source.
# expect: depends_on 'hwloc@2.9:+libxml3': column 12: package 'hwloc' has no variant 'libxml3'; did you mean 'libxml2'?
# expect: depends_on 'refrane@4.9:': column 1: unknown package 'refrane'; did you mean 'reframe'?
# expect: depends_on 'numactl': dependency type 'runtime' does not exist (build, link, run, test)
# expect: depends_on when= '+mpii': column 2: package 'topobind' has no variant 'mpii'; did you mean 'mpi'?
# expect: version('0.1.0') says nowhere to get it
# expect: provides 'topobind': 'topobind' is not a virtual in the recipe data (blas, lapack, mpi)
from spack_repo.builtin.build_systems.makefile import MakefilePackage

from spack.package import *


class Topobind(MakefilePackage):
    """Test recipe."""

    git = "https://example.invalid/topobind.git"

    version("main", branch="main")
    version("0.1.0")

    variant("mpi", default=True, description="MPI probe")

    depends_on("hwloc@2.9:+libxml3", type="run")
    depends_on("reframe@4.9:", type="run")
    depends_on("refrane@4.9:", type="run")
    depends_on("numactl", type=("build", "runtime"))
    depends_on("mpi", when="+mpii")
    with when("+mpi"):
        depends_on("openmpi schedulers=slurm")
    provides("topobind")

    def build(self, spec, prefix):
        make("-C", "kernels")
