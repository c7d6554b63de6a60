"""API keys per user: every declared user gets a key of their own for the models and the chat UI.

* one generated key per user (a ``RandomPassword``, a Pulumi secret), rotated on its own by
  bumping the user's ``apiKeyRotation``; the service key (FastChat's, the check's) stays apart;
* the model servers accept the service key and every user's key: ``vllm serve --config`` reads
  them from the ``vllm-api-keys`` Secret (never an argument, never an environment variable); a
  digest of the set on the pod templates restarts them when a key is added, removed or rotated,
  because vLLM reads its keys only at start;
* the chat UI asks for a login (Traefik ``basicAuth``): the user's name and the same key; the
  ``webui-users`` Secret holds one ``name:{SHA}<digest>`` line per user (unsalted SHA-1 is enough
  for generated 40-character keys, about 238 bits; a salt protects guessable passwords only);
* each user finds their key in ``~/.config/hpc-cluster/api-key`` (0600, theirs), written by the
  ``<head>-api-keys`` step as the user, so a link the user planted cannot redirect root's write.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random
from pydantic import Field

from components import remote
from components.base import Args
from components.remote import Ssh
from components.scripts import Raw, RemoteScript, fill, script

SCRIPTS = Path(__file__).with_name("scripts")
KEY_LENGTH = 40
USER_KEYS_SECRET = "vllm-api-keys"
KEYS_FILE = "api-keys.yaml"
KEYS_MOUNT = "/etc/vllm/keys"
WEBUI_USERS_SECRET = "webui-users"
HOME_KEY_FILE = ".config/hpc-cluster/api-key"  # under each user's home


@dataclass(frozen=True)
class KeyHolder:
    """A user who gets an API key."""

    name: str
    uid: int
    gid: int
    rotation: int = 0


def keys_document(keys: list[str]) -> str:
    """The ``vllm serve --config`` file that makes vLLM accept exactly ``keys``."""
    return "api-key:\n" + "".join(f"  - {json.dumps(k)}\n" for k in keys)


def htpasswd(keys: dict[str, str]) -> str:
    """Traefik basicAuth users: ``name:{SHA}<base64 SHA-1 of the key>``, one line each."""
    return "".join(
        f"{name}:{{SHA}}{base64.b64encode(hashlib.sha1(key.encode()).digest()).decode()}\n"
        for name, key in keys.items()
    )


def digest(keys: list[str]) -> str:
    """A short digest of a key set (not the keys) for pod-template annotations."""
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16]


def delivery(host: str, home_root: str, holders: tuple[KeyHolder, ...]) -> RemoteScript:
    """Write each user's key into their home (0600, as the user); the keys come on stdin."""
    users = " ".join(h.name for h in holders)
    body = fill(SCRIPTS / "api-keys.sh", home_root=home_root, home_text=Raw(home_root), key_file=HOME_KEY_FILE,
                key_text=Raw(HOME_KEY_FILE), users=Raw(users))  # fmt: skip
    create = script(host, f"{host}-api-keys", body, extra_headers={"secret-stdin": "api-keys"})
    undo = fill(SCRIPTS / "api-keys-delete.sh", home_root=home_root, key_file=HOME_KEY_FILE, users=Raw(users))
    delete = script(host, f"{host}-api-keys-delete", undo)
    return RemoteScript(f"{host}-api-keys", host, create, delete)


def stdin_lines(holders: tuple[KeyHolder, ...], keys: list[str]) -> str:
    """What the delivery step reads: ``<name> <key>`` per user, in the order of ``holders``."""
    return "".join(f"{h.name} {k}\n" for h, k in zip(holders, keys, strict=True))


class ApiKeysArgs(Args):
    provider: k8s.Provider = Field(description="The cluster's Kubernetes provider.")
    namespace: pulumi.Output[str] = Field(description="The inference namespace.")
    holders: tuple[KeyHolder, ...] = Field(description="The users who get a key.")
    service_key: pulumi.Output[str] = Field(description="FastChat's key (secret), accepted as well.")
    head: Ssh | None = Field(default=None, description="Where homes are written (the Slurm head); none: not delivered.")
    home_root: str = Field(default="", description="The homes' directory on the head.")
    after: list[pulumi.Resource] = Field(default_factory=list, description="The steps that create the homes.")


class ApiKeys(pulumi.ComponentResource):
    """Children: ``<name>-<user>`` (RandomPassword) per user, the ``vllm-api-keys`` and
    ``webui-users`` Secrets, and ``<head>-api-keys`` (the keys in the users' homes)."""

    digest: pulumi.Output[str]
    """A digest of every accepted key: on the model pods' template, so a change restarts them."""
    secrets: list[pulumi.Resource]
    """The Secrets the model servers and Traefik read."""

    def __init__(self, name: str, args: ApiKeysArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("hpc:inference:ApiKeys", name, None, opts)
        opt = pulumi.ResourceOptions(parent=self, provider=args.provider)
        generated = [
            random.RandomPassword(
                f"{name}-{h.name}",
                length=KEY_LENGTH,
                special=False,
                keepers={"rotation": str(h.rotation)},
                opts=pulumi.ResourceOptions(parent=self),
            ).result
            for h in args.holders
        ]
        user_keys: pulumi.Output[list[str]] = pulumi.Output.secret(pulumi.Output.all(*generated))
        accepted: pulumi.Output[list[str]] = pulumi.Output.all(args.service_key, user_keys).apply(
            lambda a: [a[0], *a[1]]
        )
        self.digest = pulumi.Output.unsecret(accepted.apply(digest))
        md = lambda n: k8s.meta.v1.ObjectMetaArgs(name=n, namespace=args.namespace)  # noqa: E731
        names = [h.name for h in args.holders]
        keys_file: pulumi.Output[str] = pulumi.Output.secret(accepted.apply(keys_document))
        # Traefik refuses an empty users Secret; "{SHA}!" matches no password (base64 has no "!")
        users_file: pulumi.Output[str] = pulumi.Output.secret(
            user_keys.apply(lambda ks: htpasswd(dict(zip(names, ks, strict=True))) or "nobody:{SHA}!\n")
        )
        self.secrets = [
            k8s.core.v1.Secret(
                f"{name}-accepted",
                metadata=md(USER_KEYS_SECRET),
                string_data={KEYS_FILE: keys_file},
                opts=opt,
            ),
            k8s.core.v1.Secret(
                f"{name}-webui-users",
                metadata=md(WEBUI_USERS_SECRET),
                string_data={"users": users_file},
                opts=opt,
            ),
        ]
        if args.head is not None and args.holders:
            remote.run(
                f"{args.head.name}-api-keys",
                args.head,
                delivery(args.head.name, args.home_root, args.holders),
                stdin=pulumi.Output.secret(user_keys.apply(lambda ks: stdin_lines(args.holders, ks))),
                secret_stdin=True,
                opts=pulumi.ResourceOptions(parent=self, depends_on=args.after),
            )
        self.register_outputs({})
