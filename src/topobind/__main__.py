"""``python -m topobind``: the ``topobind`` command."""

from topobind.cli.main import entry

entry()
