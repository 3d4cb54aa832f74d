# Broken on purpose: the Makefile's variable is PREFIX.
# expect: passes PREFX= to make, but kernels/Makefile never uses $(PREFX)
from spack_repo.builtin.build_systems.makefile import MakefilePackage

from spack.package import *


class Topobind(MakefilePackage):
    """Test recipe."""

    git = "https://example.invalid/topobind.git"

    version("main", branch="main")

    def install(self, spec, prefix):
        make("-C", "kernels", "install", f"PREFX={prefix}")
