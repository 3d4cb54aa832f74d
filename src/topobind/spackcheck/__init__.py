"""Spack support without Spack: check spack.yaml, the site overlays and topobind's recipe
against Spack's own schema and recipe data (``$TOPOBIND_SHARED/spack``), and detect this
machine's externals the way ``spack external find`` does.

Modules, one concept each: :mod:`~.specs` (spec syntax parser), :mod:`~.versions` (version
matching), :mod:`~.recipedata` (packages, variants, virtuals), :mod:`~.speccheck` (a spec
against the data), :mod:`~.yamlfile` (YAML with line numbers), :mod:`~.envfile`
(spack.yaml and overlays), :mod:`~.makefiles` and :mod:`~.recipe` (topobind's package.py),
:mod:`~.check` (all of it), :mod:`~.externals` (``topobind spack externals``).
"""
