"""A YAML file with the line of every value, so that messages can say ``spack.yaml:18``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from topobind.errors import TopobindError
from topobind.spackcheck.locations import display

YamlPath = tuple[str | int, ...]


@dataclass
class YamlFile:
    path: Path
    data: Any
    lines: dict[YamlPath, int]

    @property
    def name(self) -> str:
        return display(self.path)

    def line(self, *where: str | int) -> int:
        """Line of the value at ``where`` (or of its closest enclosing value)."""
        key: YamlPath = tuple(where)
        while key and key not in self.lines:
            key = key[:-1]
        return self.lines.get(key, 0)


def load(path: Path) -> YamlFile:
    try:
        text = path.read_text()
    except OSError as exc:
        raise TopobindError(f"{display(path)}: cannot read: {exc.strerror}") from exc
    try:
        data = yaml.safe_load(text)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise TopobindError(f"{display(path)}{where}: not valid YAML: {problem}") from exc
    lines: dict[YamlPath, int] = {}
    if node is not None:
        _index(node, (), lines)
    return YamlFile(path, data, lines)


def _index(node: yaml.Node, where: YamlPath, lines: dict[YamlPath, int]) -> None:
    lines[where] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            _index(value, (*where, str(key.value)), lines)
            lines[(*where, str(key.value))] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index(item, (*where, i), lines)
