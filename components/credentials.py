"""Values that are never a real secret: the stack's config refuses them as secrets
(``stacks.config_base``) and the policy pack refuses them wherever a credential appears
(``policy.facts``). One list, so the two cannot disagree."""

from __future__ import annotations

PLACEHOLDER_SECRETS = frozenset(
    {"changeme", "change-me", "admin", "password", "secret", "empty", "default", "root", "test"}
)
