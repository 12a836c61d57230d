//go:build tools

// Package jaeger only anchors Jaeger's all-in-one binary in this module's build list.
package jaeger

import _ "github.com/jaegertracing/jaeger/cmd/jaeger"
