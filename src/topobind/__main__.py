"""``python -m topobind``: the ``topobind`` command."""

from topobind.cli import entry

entry()
