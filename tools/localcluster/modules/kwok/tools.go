//go:build tools

// Package kwok only anchors the kwok command in this module's build list.
package kwok

import _ "sigs.k8s.io/kwok/cmd/kwok"
