"""Shared bits of component wiring: the args base class."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Args(BaseModel):
    """Base for component args: frozen, no unknown fields, Pulumi objects allowed as values."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)
