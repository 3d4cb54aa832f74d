"""The commands of docs/reframe-ci.md, read from the page: shared by
``tests/validation/test_reframe_ci_doc.py`` and ``scripts/bench-reframe-ci.py`` (which import it
with ``scripts/`` on ``sys.path``), so the benchmark runs what the page says.

- :func:`cluster_py`: the page's ``cluster.py`` (the ```` ```python ```` block that starts with
  "# A cluster's own ReFrame configuration").
- :func:`reframe_commands`: the page's ``$ ... reframe -C cluster.py ...`` console lines.
"""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "reframe-ci.md"


def cluster_py(text: str) -> str:
    """The one ``cluster.py`` block of the page."""
    (code,) = re.findall(r"```python\n(# A cluster's own ReFrame configuration.*?)```", text, re.S)
    return code


def reframe_commands(text: str) -> list[str]:
    """Every console line of the page that runs ``reframe -C cluster.py`` (without ``$ ``)."""
    return [
        m.group(1).strip() for m in re.finditer(r"^\$ (.*\breframe -C cluster\.py .*)$", text, re.M)
    ]
