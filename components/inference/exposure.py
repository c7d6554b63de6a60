"""Exposure: the FastChat web UI and each model's OpenAI API reachable from outside the cluster,
the way k3s does it: Ingresses served by its bundled Traefik on every node's ports 80/443.

* ``https://<publicHost>/`` is the web UI, behind a login (Traefik ``basicAuth``: a user's name
  and their API key, from the ``webui-users`` Secret; components/inference/keys.py);
* ``https://<publicHost>/<model>/v1`` is each model's OpenAI-compatible API (a Traefik
  ``stripPrefix`` middleware hands vLLM its own ``/v1``); only that prefix is routed (an Ingress
  ``Prefix`` path matches whole path elements), so vLLM's ``/metrics``, ``/docs`` and the rest
  of its routes stay inside the cluster; vLLM refuses any request without the
  API key (``Authorization: Bearer``), so the key is required outside as inside;
* ``/metrics/<model>`` is each model server's ``/metrics`` for Prometheus on the head, behind
  the monitoring login (a ``kubernetes.io/basic-auth`` Secret from hpc:monitoringPassword): no
  model server publishes a port of its own on its host, so nothing bypasses Traefik;
* TLS with the site's certificate when the stack gives one (a ``kubernetes.io/tls`` Secret): the
  routes then answer only on Traefik's ``websecure`` entry point and one Ingress on ``web``
  redirects every plain HTTP request to HTTPS; plain HTTP otherwise (dev only: a prod stack with
  models is refused without a certificate, stacks/config.py; the URLs say which).
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from components.base import Args
from components.inference.keys import WEBUI_USERS_SECRET
from components.inference.render import ModelServer

TLS_SECRET = "public-tls"
MIDDLEWARE_API = "traefik.io/v1alpha1"
INGRESS_CLASS = "traefik"
MIDDLEWARES = "traefik.ingress.kubernetes.io/router.middlewares"
ENTRYPOINTS = "traefik.ingress.kubernetes.io/router.entrypoints"
ROUTER_TLS = "traefik.ingress.kubernetes.io/router.tls"
LOGIN = "webui-login"
METRICS_LOGIN = "metrics-login"
REDIRECT = "redirect-https"
REALM = "hpc-cluster"


class ExposureArgs(Args):
    provider: k8s.Provider = Field(description="The cluster's Kubernetes provider.")
    namespace: pulumi.Output[str] = Field(description="The inference namespace.")
    public_host: str = Field(description="The name (or address) users reach the cluster by.")
    models: list[ModelServer] = Field(description="Every served model.")
    webui_service: str = Field(description="The FastChat web UI's Service.")
    webui_port: int = Field(description="Its port.")
    tls_certificate: pulumi.Output[str] | None = Field(default=None, description="PEM certificate chain (secret).")
    tls_key: pulumi.Output[str] | None = Field(default=None, description="PEM private key (secret).")
    metrics_user: str = Field(default="admin", description="The monitoring login's name.")
    metrics_password: pulumi.Output[str] | None = Field(
        default=None, description="The monitoring login's password (secret); none: no metrics routes."
    )


class Exposure(pulumi.ComponentResource):
    """Children: the ``webui-login`` Middleware and ``<name>-webui`` Ingress, per model a
    ``strip-<model>`` Middleware and ``<name>-<model>`` Ingress; with TLS the Secret, the
    ``redirect-https`` Middleware and the ``<name>-http`` Ingress that redirects; with the
    monitoring login the ``metrics-login`` Secret and Middleware, and per model ``metrics-<model>``
    (Middleware and Ingress)."""

    urls: dict[str, str]
    """``chat`` and one API base URL per model."""

    def __init__(self, name: str, args: ExposureArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("hpc:inference:Exposure", name, None, opts)
        opt = pulumi.ResourceOptions(parent=self, provider=args.provider)
        tls = None
        scheme = "http"
        if args.tls_certificate is not None and args.tls_key is not None:
            k8s.core.v1.Secret(
                f"{name}-tls",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=TLS_SECRET, namespace=args.namespace),
                type="kubernetes.io/tls",
                string_data={"tls.crt": args.tls_certificate, "tls.key": args.tls_key},
                opts=opt,
            )
            tls = [k8s.networking.v1.IngressTLSArgs(hosts=[args.public_host], secret_name=TLS_SECRET)]
            scheme = "https"
        base = f"{scheme}://{args.public_host}"

        def middleware(mname: str, spec: dict[str, object]) -> pulumi.Output[str]:
            """A Middleware; returns its reference for an Ingress annotation."""
            k8s.apiextensions.CustomResource(
                f"{name}-{mname}",
                api_version=MIDDLEWARE_API,
                kind="Middleware",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=mname, namespace=args.namespace),
                spec=spec,
                opts=opt,
            )
            return pulumi.Output.concat(args.namespace, f"-{mname}@kubernetescrd")  # Traefik's "<ns>-<name>"

        secure = {ENTRYPOINTS: "websecure", ROUTER_TLS: "true"} if tls else {}

        def ingress(
            iname: str,
            path: str,
            service: str,
            port: int,
            mw: pulumi.Input[str],
            entry: dict[str, str] = secure,
            path_type: str = "Prefix",
        ) -> None:
            annotations: dict[str, pulumi.Input[str]] = {**entry, MIDDLEWARES: mw}
            k8s.networking.v1.Ingress(
                f"{name}-{iname}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=iname, namespace=args.namespace, annotations=annotations),
                spec=k8s.networking.v1.IngressSpecArgs(
                    ingress_class_name=INGRESS_CLASS,
                    tls=None if entry.get(ENTRYPOINTS) == "web" else tls,
                    rules=[
                        k8s.networking.v1.IngressRuleArgs(
                            host=None if _is_address(args.public_host) else args.public_host,
                            http=k8s.networking.v1.HTTPIngressRuleValueArgs(
                                paths=[
                                    k8s.networking.v1.HTTPIngressPathArgs(
                                        path=path,
                                        path_type=path_type,
                                        backend=k8s.networking.v1.IngressBackendArgs(
                                            service=k8s.networking.v1.IngressServiceBackendArgs(
                                                name=service,
                                                port=k8s.networking.v1.ServiceBackendPortArgs(number=port),
                                            )
                                        ),
                                    )
                                ]
                            ),
                        )
                    ],
                ),
                opts=opt,
            )

        login = middleware(LOGIN, {"basicAuth": {"secret": WEBUI_USERS_SECRET, "realm": REALM, "removeHeader": True}})
        ingress("webui", "/", args.webui_service, args.webui_port, login)
        if tls:
            redirect = middleware(REDIRECT, {"redirectScheme": {"scheme": "https", "permanent": True}})
            # every path on plain HTTP: a redirect, never the service
            ingress("http", "/", args.webui_service, args.webui_port, redirect, entry={ENTRYPOINTS: "web"})
        self.urls = {"chat": f"{base}/"}
        for m in args.models:
            strip = middleware(f"strip-{m.name}", {"stripPrefix": {"prefixes": [f"/{m.name}"]}})
            ingress(m.name, f"/{m.name}/v1", m.name, m.port, strip)
            self.urls[m.name] = f"{base}/{m.name}/v1"
        if args.metrics_password is not None:
            k8s.core.v1.Secret(
                f"{name}-{METRICS_LOGIN}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=METRICS_LOGIN, namespace=args.namespace),
                type="kubernetes.io/basic-auth",
                string_data={"username": args.metrics_user, "password": args.metrics_password},
                opts=opt,
            )
            metrics_login = middleware(METRICS_LOGIN, {"basicAuth": {"secret": METRICS_LOGIN, "removeHeader": True}})
            for m in args.models:
                to_metrics = middleware(f"metrics-{m.name}", {"replacePath": {"path": "/metrics"}})
                chain = pulumi.Output.concat(metrics_login, ",", to_metrics)
                ingress(f"metrics-{m.name}", metrics_path(m.name), m.name, m.port, chain, path_type="Exact")
        self.register_outputs({"urls": self.urls})


def metrics_path(model: str) -> str:
    """Where Prometheus finds a model server's /metrics through Traefik."""
    return f"/metrics/{model}"


def _is_address(host: str) -> bool:
    return all(part.isdigit() for part in host.split("."))
