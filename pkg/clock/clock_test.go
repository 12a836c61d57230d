package clock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSleep(t *testing.T) {
	assert.True(t, Sleep(context.Background(), time.Millisecond), "the whole wait passed")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.False(t, Sleep(ctx, time.Hour), "a stop cuts it short")
}
