# Broken on purpose: a missing colon.
# expect: not valid Python: expected ':'
from spack.package import *


class Topobind(Package):
    def install(self, spec, prefix)
        make("-C", "kernels", "install")
