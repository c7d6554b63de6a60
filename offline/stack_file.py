"""Reading ``Pulumi.<stack>.yaml`` the way the Pulumi CLI does, with errors a person can act on.

The CLI refuses a stack file with a duplicate key at any depth and reports YAML syntax errors
with their position; PyYAML's ``safe_load`` silently keeps the last duplicate and raises a
multi-line exception. ``read`` makes the offline plan agree with the CLI: every problem becomes a
``StackFileError`` with one line naming the file, line and column (or the stacks that exist).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class StackFileError(Exception):
    """A stack file that cannot be read: ``where`` is ``file[:line:column]``."""

    def __init__(self, where: str, message: str) -> None:
        self.where, self.message = where, message
        super().__init__(f"{where}: {message}")


class _StrictLoader(yaml.SafeLoader):
    """A safe loader that refuses duplicate mapping keys."""


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, str):
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is not a string (config keys are names); quote it", key_node.start_mark
            )
        if key in seen:
            first = seen[key].start_mark.line + 1
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first on line {first})", key_node.start_mark
            )
        seen[key] = key_node
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def stacks_in(program_dir: Path) -> list[str]:
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in program_dir.glob("Pulumi.*.yaml"))


def read(program_dir: Path, stack: str) -> dict[str, Any]:
    """The parsed stack file, or StackFileError (missing file, syntax, duplicate key, bad shape)."""
    path = program_dir / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        known = ", ".join(stacks_in(program_dir)) or "none"
        raise StackFileError(
            path.name, f"no such stack file; stacks here: {known} (pulumi stack init {stack} makes one)"
        )
    return parse_text(path.read_text(), path.name)


def parse_text(text: str, name: str) -> dict[str, Any]:
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
        what = " ".join(str(x) for x in (e.context, e.problem) if x)
        raise StackFileError(where, what or "not valid YAML") from None
    except yaml.YAMLError as e:
        raise StackFileError(name, str(e).splitlines()[0]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise StackFileError(name, f"a stack file is a mapping with a 'config:' key, not a {type(data).__name__}")
    config = data.get("config")
    if config is not None and not isinstance(config, dict):
        raise StackFileError(name, "'config:' must be a mapping of 'namespace:key' to values")
    for key in config or {}:
        if not isinstance(key, str) or not key:
            raise StackFileError(name, f"config key {key!r} is not a 'namespace:key' string; quote it")
    return data
