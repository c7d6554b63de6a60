"""Shared pieces of the stack config: the error type, roles, the base model, common field types."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Any

import pulumi
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from components.credentials import PLACEHOLDER_SECRETS
from stacks import paths

NAMESPACE = "hpc"
HOSTNAME_PATTERN = r"^[a-z][a-z0-9-]{0,62}$"
ABS_PATH_PATTERN = r"^/[A-Za-z0-9._/-]*$"
K3S_VERSION_PATTERN = r"^v1\.(\d+)\.\d+\+k3s\d+$"
RESERVED_PORTS = frozenset({22, 2049, 6443, 6817, 6818, 6819, 10250, 24007})


class ConfigError(pulumi.RunError):
    """Bad stack input: ``key`` names the config key, ``message`` says what is wrong; ``problems``
    holds every (key, message) found in the run, the first one included, one line each."""

    def __init__(self, key: str, message: str, more: Sequence[tuple[str, str]] = ()) -> None:
        self.key = key
        self.message = message
        self.problems = [(key, message), *more]
        super().__init__("\n".join(f"{k}: {m}" for k, m in self.problems))

    @classmethod
    def of(cls, problems: Sequence[tuple[str, str]]) -> ConfigError:
        first, *rest = problems or [(f"{NAMESPACE}:", "invalid configuration")]
        return cls(*first, more=rest)


def _at(path: str, message: str) -> ValueError:
    """A validator error that names a path relative to the model raising it."""
    return ValueError(f"@{path}: {message}")


class Role(StrEnum):
    """What a host is for. A host may carry several roles."""

    STORAGE = "storage"
    SLURM_HEAD = "slurm-head"
    GPU_WORKER = "gpu-worker"
    INFERENCE = "inference"
    K3S_SERVER = "k3s-server"
    K3S_AGENT = "k3s-agent"
    LOGIN = "login"
    CPU_WORKER = "cpu-worker"


class Environment(StrEnum):
    DEV = "dev"
    PROD = "prod"


# The widest integer every consumer holds: bash arithmetic, Slurm's and Gluster's options (int64).
MAX_INT = 2**63 - 1


def _int64(v: Any) -> Any:
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and not -MAX_INT - 1 <= v <= MAX_INT:
        raise ValueError(f"{v} is beyond a 64-bit integer (bash arithmetic and Slurm wrap or refuse it)")
    if isinstance(v, (list, tuple)):
        for x in v:
            _int64(x)
    return v


class _Model(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        use_enum_values=False,
    )

    @field_validator("*", mode="after")
    @classmethod
    def _fits_int64(cls, v: Any) -> Any:
        return _int64(v)


Port = Annotated[int, Field(ge=1, le=65535)]
AbsPath = Annotated[str, Field(pattern=ABS_PATH_PATTERN)]
# A directory that host scripts create, mount or chown: normalised, never a system directory.
HostPath = Annotated[str, Field(pattern=ABS_PATH_PATTERN), AfterValidator(paths.host_path)]
Name = Annotated[str, Field(pattern=HOSTNAME_PATTERN)]


# Roles whose host runs a Slurm container on the macvlan network (it needs a containerAddress).
CONTAINER_ROLES = (Role.SLURM_HEAD, Role.GPU_WORKER, Role.CPU_WORKER, Role.LOGIN)
# Roles that make a host a Slurm compute node.
WORKER_ROLES = (Role.GPU_WORKER, Role.CPU_WORKER)


MIN_PASSWORD = 16


def password_problems(full: str, value: str | None) -> list[tuple[str, str]]:
    """A login password the hosts hash (the value itself is never printed)."""
    if not value or value.strip().lower() in PLACEHOLDER_SECRETS:
        return []  # missing or a placeholder: secret_problem says so
    if len(value) < MIN_PASSWORD:
        return [(full, f"at least {MIN_PASSWORD} characters, please (this one is {len(value)})")]
    if any(not c.isprintable() for c in value):
        return [(full, "one line of printable characters, please (no newline or control characters)")]
    return []


def secret_problem(key: str, value: str | None, required: bool) -> tuple[str, str] | None:
    """What is wrong with a secret input, if anything (the value itself is never printed)."""
    full = f"{NAMESPACE}:{key}"
    if value is None or not value.strip():
        return (full, "required secret is missing (pulumi config set --secret)") if required else None
    if value.strip().lower() in PLACEHOLDER_SECRETS:
        return full, "placeholder value refused; set a real secret"
    if not pulumi.runtime.is_config_secret(full):
        return full, "must be set as a secret (pulumi config set --secret)"
    return None
