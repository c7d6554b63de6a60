"""What the policies read from resources: plain helpers over the properties the engine sends."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from components import scripts

REMOTE_COMMAND = "command:remote:Command"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
DOCKER_IMAGE = "docker:index/image:Image"
DOCKER_CONTAINER = "docker:index/container:Container"
SECRET_NAME = re.compile(r"(PASSWORD|PASSWD|TOKEN|SECRET|PRIVATE_KEY|API_KEY|MUNGE_KEY)", re.I)
ROOT = Path(__file__).resolve().parent.parent


def step_headers(props: Mapping[str, Any]) -> dict[str, str]:
    """The ``# hpc:`` header fields of a remote command's create script."""
    create = props.get("create")
    return scripts.headers(scripts.unwrap(create)) if isinstance(create, str) else {}


def step_script(props: Mapping[str, Any], key: str = "create") -> str:
    text = props.get(key)
    return scripts.unwrap(text) if isinstance(text, str) else ""


def containers(props: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = ((props.get("spec") or {}).get("template") or {}).get("spec") or {}
    return [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]


def pod_spec(props: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((props.get("spec") or {}).get("template") or {}).get("spec") or {}


def image_problem(image: str) -> str | None:
    """Why an image reference is not pinned, or None (a digest pins it whatever its tag)."""
    if re.search(r"@sha256:[0-9a-f]{64}$", image):
        return None
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" not in last:
        return "has no tag"
    if last.rsplit(":", 1)[1] == "latest":
        return "uses the mutable :latest tag"
    return None


def dockerfile_of(props: Mapping[str, Any]) -> tuple[str, str] | None:
    """(path, text) of a docker Image's Dockerfile, read from the project like the build would."""
    build = props.get("build") or {}
    path = build.get("dockerfile")
    if not isinstance(path, str):
        return None
    file = ROOT / path
    return (path, file.read_text()) if file.is_file() else None


def from_lines(dockerfile: str) -> Iterator[str]:
    for line in dockerfile.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].upper() == "FROM":
            yield parts[1]


def literal_env(env: Any) -> Iterator[tuple[str, str]]:
    """(name, value) of environment entries given as literal values."""
    for e in env or []:
        if isinstance(e, Mapping) and isinstance(e.get("value"), str):
            yield str(e.get("name", "")), e["value"]
        elif isinstance(e, str) and "=" in e:
            k, _, v = e.partition("=")
            yield k, v
