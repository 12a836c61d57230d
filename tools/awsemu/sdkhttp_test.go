package awsemu

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/pkg/sdkhttp"
)

// lateWriter is a client connection whose writing goroutine falls behind as on a busy machine:
// once a request body is on the wire it returns only after the answer has begun to arrive, and
// the answer is read in small, slow pieces, as a reader competing for a CPU reads it. It makes
// the race between the SDK closing a request's body and net/http's last check of that body
// happen every time, where load makes it happen now and then.
type lateWriter struct {
	net.Conn
	answered chan struct{}
	once     atomic.Bool
}

func (c *lateWriter) ReadFrom(r io.Reader) (int64, error) {
	n, err := io.Copy(c.Conn, r) // the body, straight to the socket, as *net.TCPConn would
	select {
	case <-c.answered:
		time.Sleep(20 * time.Millisecond) // the caller has the response by now
	case <-time.After(2 * time.Second):
	}
	return n, err
}

func (c *lateWriter) Read(b []byte) (int, error) {
	time.Sleep(time.Millisecond)
	n, err := c.Conn.Read(b[:min(len(b), 4096)])
	if n > 0 && c.once.CompareAndSwap(false, true) {
		close(c.answered)
	}
	return n, err
}

// lateClient is an HTTP client whose connections are lateWriters.
func lateClient() *http.Client {
	d := &net.Dialer{}
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &lateWriter{Conn: c, answered: make(chan struct{})}, nil
	}}}
}

// Issue 31, item 11: the cut-off DescribeInstanceTypes answers. The SDK's request body, once
// closed, says io.EOF from WriteTo; net/http's last check of a written body goes through
// WriteTo, so when the answer comes before that check (the emulator answers in microseconds,
// and the client's writing goroutine waits for a CPU) the check fails and the transport
// closes the connection under the answer being read: "deserialization failed ... use of closed
// network connection" on a 200. The client the services give the SDK (pkg/sdkhttp) reads every
// answer whole; the SDK's own does not.
func TestSDKReadsAnAnswerThatComesBeforeItsRequestIsWritten(t *testing.T) {
	e := newEnv(t, nil)
	call := func(hc aws.HTTPClient) error {
		cfg := sdkConfig(e.url, 1)
		cfg.HTTPClient = hc
		_, err := ec2.NewFromConfig(cfg).DescribeInstanceTypes(context.Background(), &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(100)})
		return err
	}
	for i := 0; i < 3; i++ {
		require.NoError(t, call(sdkhttp.Client(lateClient())), "through pkg/sdkhttp every answer is read whole")
	}
	err := call(lateClient())
	require.Error(t, err, "without it the race cuts the answer off (this test's connections make it happen every time)")
	assert.Contains(t, err.Error(), "use of closed network connection")
}
