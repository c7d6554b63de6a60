//go:build tools

// Package tools pins Traefik (k3s's bundled ingress controller, at the version k3s's chart ships)
// for the Kubernetes API suite: `go build` of the published module, nothing vendored.
package tools

import _ "github.com/traefik/traefik/v3/cmd/traefik"
