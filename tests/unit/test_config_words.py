"""No refusal shows a raw regex: every pattern a config model uses has words and an example."""

from __future__ import annotations

import typing

import pytest
from pydantic import BaseModel

from offline import plan, stack_file
from stacks.config import ClusterConfig, ConfigError, parse
from stacks.config_words import PATTERN_WORDS


def prod_config() -> dict[str, typing.Any]:
    doc = stack_file.read(plan.ROOT, "prod")
    return {k.split(":", 1)[1]: v for k, v in doc["config"].items()}


def patterns(t: typing.Any, path: str = "", out: dict[str, set[str]] | None = None, depth: int = 0) -> dict:
    """Every string pattern in the model tree under ``t``, with the keys that use it."""
    out = {} if out is None else out
    if depth > 14:
        return out
    origin = typing.get_origin(t)
    if origin is typing.Annotated:
        base, *meta = typing.get_args(t)
        for m in meta:
            for c in [m, *getattr(m, "metadata", [])]:
                if getattr(c, "pattern", None):
                    out.setdefault(c.pattern, set()).add(path)
        return patterns(base, path, out, depth + 1)
    if origin is not None:
        for a in typing.get_args(t):
            patterns(a, path, out, depth + 1)
    elif isinstance(t, type) and issubclass(t, BaseModel):
        for n, f in t.model_fields.items():
            key = f"{path}.{f.alias or n}"
            for c in f.metadata:
                if getattr(c, "pattern", None):
                    out.setdefault(c.pattern, set()).add(key)
            patterns(f.annotation, key, out, depth + 1)
    return out


def test_every_pattern_has_words_with_an_example():
    found = patterns(ClusterConfig)
    assert len(found) >= 15  # the walk reaches the models (a broken walk finds none)
    missing = {p: sorted(keys) for p, keys in found.items() if p not in PATTERN_WORDS}
    assert not missing, f"patterns without words in stacks/config_words.py: {missing}"
    for words in PATTERN_WORDS.values():
        assert "(e.g. " in words and "^" not in words


@pytest.mark.parametrize(
    ("where", "value", "words"),
    [
        (("hosts", 0, "sshUser"), "Root Admin", "a login, group or Slurm account name is lower-case"),
        (("slurm", "registry"), "https://registry.lab", "without a scheme (e.g. registry.lab:5000)"),
        (("k3s", "version"), "1.31", "(e.g. v1.31.4+k3s1)"),
        (("slurm", "clusterName"), "HPC", "a Slurm cluster name is lower-case"),
    ],
)
def test_a_pattern_refusal_says_what_is_expected(where, value, words):
    cfg = prod_config()
    node = cfg
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = value
    with pytest.raises(ConfigError) as err:
        parse(cfg)
    text = str(err.value)
    assert words in text and "should match pattern" not in text, text
