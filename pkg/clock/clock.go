// Package clock is the services' one way of waiting that a stop cuts short.
package clock

import (
	"context"
	"time"
)

// Sleep waits for d, or until ctx ends; it reports whether all of d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
