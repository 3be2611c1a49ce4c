"""The one YAML reader for every file a user hands spanwatch (config, web.yml, mappings, thresholds, claims).

It bounds what a file may cost before anything walks it (issue 16): a YAML alias bomb is a few hundred
bytes that expand to billions of nodes (9.9 GB in ``check-config``; a 25 s freeze on SIGHUP), deep nesting
overflows the recursive composer, and binary or non-UTF-8 bytes are not text. Each of these becomes one
clear ``YamlInputError`` instead of a hang or a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

from collector.errors import ConfigError, SpanwatchError

MAX_BYTES = 64 * 1024 * 1024  # a 20,000-target config is about 2 MB
MAX_DEPTH = 64  # real configs nest about 6 deep
MAX_NODES = 5_000_000  # nodes after aliases are expanded; a 20,000-target config has about 400k


class YamlInputError(ValueError):
    """The file cannot be read as bounded YAML; the message says why, without the file's content."""


class _BoundedLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses documents nested deeper than ``MAX_DEPTH`` while composing."""

    _depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise YamlInputError(f"nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def expanded_size(node: Node, limit: int = MAX_NODES) -> int:
    """How many nodes ``node`` stands for once every alias is expanded (stops counting past ``limit``).

    Raises:
        YamlInputError: the expansion exceeds ``limit`` (an alias bomb).
    """
    memo: dict[int, int] = {}

    def size(n: Node) -> int:
        known = memo.get(id(n))
        if known is not None:
            return known
        total = 1
        if isinstance(n, SequenceNode):
            total += sum(size(child) for child in n.value)
        elif isinstance(n, MappingNode):
            total += sum(size(k) + size(v) for k, v in n.value)
        if total > limit:
            raise YamlInputError(f"expands to more than {limit:,} nodes (too many aliases)")
        memo[id(n)] = total
        return total

    return size(node)  # recursion is bounded: the composer refused anything deeper than MAX_DEPTH


def load(path: Path) -> Any:
    """The document of a YAML file (None when empty).

    Raises:
        OSError: the file cannot be read.
        YamlInputError: too large, not UTF-8 text, not YAML, too deep, or an alias bomb.
    """
    with open(path, "rb") as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise YamlInputError(f"larger than {MAX_BYTES // (1024 * 1024)} MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise YamlInputError(f"not UTF-8 text (byte {e.start})") from None
    try:
        loader = _BoundedLoader(text)  # the reader refuses control characters here already
    except yaml.YAMLError as e:
        raise YamlInputError(f"not valid YAML: {' '.join(str(e).split())}") from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        expanded_size(node)
        return loader.construct_document(node)
    except yaml.YAMLError as e:
        raise YamlInputError(f"not valid YAML: {' '.join(str(e).split())}") from None
    except RecursionError:
        raise YamlInputError(f"nested deeper than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()


def read_yaml(path: Path, error: type[SpanwatchError] = ConfigError) -> Any:
    """A YAML file's document ({} when empty), read within these bounds.

    Raises:
        SpanwatchError: of type ``error``, when the file cannot be read or is not YAML.
    """
    try:
        raw = load(path)
    except OSError as e:
        raise error(f"{path}: {e.strerror}") from None
    except YamlInputError as e:
        raise error(f"{path}: {e}") from None
    return raw if raw is not None else {}
