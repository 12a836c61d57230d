//go:build tools

// Package etcd only anchors the etcd server in this module's build list.
package etcd

import _ "go.etcd.io/etcd/server/v3"
