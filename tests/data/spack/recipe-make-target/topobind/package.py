# Broken on purpose: 'instal' is not a target of kernels/Makefile.
# expect: make -C kernels instal: no target 'instal' in kernels/Makefile; did you mean 'install'?
from spack_repo.builtin.build_systems.makefile import MakefilePackage

from spack.package import *


class Topobind(MakefilePackage):
    """Test recipe."""

    git = "https://example.invalid/topobind.git"

    version("main", branch="main")

    def build(self, spec, prefix):
        make("-C", "kernels")

    def install(self, spec, prefix):
        make("-C", "kernels", "instal", f"PREFIX={prefix}")
