#!/bin/bash
# FastChat entrypoint:
#   fastchat-entrypoint controller   the FastChat controller
#   fastchat-entrypoint webui        Gradio side-by-side web server over api_endpoints.json
#   fastchat-entrypoint health       exit 0 when this container's server accepts connections
# api_endpoints.json (a ConfigMap) carries a placeholder for the vLLM API key; the key comes
# from $VLLM_API_KEY (a Kubernetes Secret) and is written to a private copy, never logged.
set -euo pipefail
ENDPOINTS=${ENDPOINTS:-/etc/fastchat/api_endpoints.json}
CONTROLLER_URL=${CONTROLLER_URL:-http://fastchat-controller:21001}

case "${1:-webui}" in
  controller)
    exec python3 -m fastchat.serve.controller --host 0.0.0.0 --port 21001 ;;
  webui)
    [ -n "${VLLM_API_KEY:-}" ] || { echo "fastchat-entrypoint: VLLM_API_KEY is not set" >&2; exit 1; }
    umask 077
    private=$(mktemp)
    template=$(<"$ENDPOINTS")
    printf '%s\n' "${template//@@VLLM_API_KEY@@/$VLLM_API_KEY}" >"$private"
    exec python3 -m fastchat.serve.gradio_web_server_multi --host 0.0.0.0 --port 7860 \
      --controller-url "$CONTROLLER_URL" --register-api-endpoint-file "$private" ;;
  health)
    # One image, two roles: healthy when the controller's or the web UI's port accepts.
    (exec 3<>/dev/tcp/127.0.0.1/21001) 2>/dev/null || (exec 3<>/dev/tcp/127.0.0.1/7860) 2>/dev/null ;;
  *)
    echo "usage: fastchat-entrypoint controller|webui|health" >&2
    exit 2 ;;
esac
