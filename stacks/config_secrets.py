"""The stack's secret inputs (``pulumi config set --secret``): which keys exist, which every
stack of this repository is planned with, and the secret Outputs the program passes on."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

SECRET_KEYS = (
    "sshPrivateKey",
    "hfToken",
    "tlsCertificate",
    "tlsKey",
    "alertWebhookUrl",
    "watchdogWebhookUrl",
    "ldapBindPassword",
    "monitoringPassword",
    "backupPassword",
)
# The secrets every stack of this repository is planned with (stand-ins offline) ...
PLANNED_SECRET_KEYS = ("sshPrivateKey", "hfToken", "monitoringPassword", "backupPassword")
# ... and a prod stack with TLS too (it refuses to serve models without).
PROD_PLANNED_SECRET_KEYS = ("tlsCertificate", "tlsKey")
REQUIRED_SECRET_KEYS = ("sshPrivateKey",)


@dataclass(frozen=True)
class ClusterSecrets:
    """Secret stack inputs, only ever as secret Outputs."""

    ssh_private_key: pulumi.Output[str]
    hf_token: pulumi.Output[str] | None
    tls_certificate: pulumi.Output[str] | None = None
    tls_key: pulumi.Output[str] | None = None
    alert_webhook_url: pulumi.Output[str] | None = None
    watchdog_webhook_url: pulumi.Output[str] | None = None
    ldap_bind_password: pulumi.Output[str] | None = None
    monitoring_password: pulumi.Output[str] | None = None  # required when monitoring is enabled
    backup_password: pulumi.Output[str] | None = None  # required when backups are enabled
