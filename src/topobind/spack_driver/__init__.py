"""Spack support: the project's Spack files checked by real Spack, and this machine's
externals for a site overlay.

Modules, one concept each: :mod:`~.realspack` (a private, offline Spack under
``build/spack``), :mod:`~.check` (``topobind spack check``: which Spack commands run on what,
cached, with hints), :mod:`~.externals` (``topobind spack externals``: what ``spack external
find`` does not find here, and the variants it detects where it does), :mod:`~.locations`.
"""
