// Package sdkhttp is the HTTP client the services give the AWS SDK (aws.Config.HTTPClient).
//
// It exists for one race. smithy-go (the SDK's transport layer) wraps each request body in a
// reader that it closes as soon as the client returns the response; once closed, that reader's
// WriteTo returns io.EOF as an error. net/http's transport, after it has written a body of
// known length, reads the body once more to check that nothing is left, and that read goes
// through WriteTo. When the answer arrives before that check has run — a server on the same
// machine answering in microseconds, or a service whose write goroutine waits for a CPU — the
// check fails with io.EOF, the transport closes the connection under the response being read,
// and the call ends in "deserialization failed ... use of closed network connection" with a
// 200 status: a DescribeInstanceTypes page cut off, a launcher start without a catalog.
//
// Client hides the body's WriteTo, so the transport's check reads through Read, where a closed
// body's io.EOF is the clean end of the body it is.
package sdkhttp

import (
	"io"
	"net/http"
)

// Doer is what the SDK calls (aws.HTTPClient).
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// Client wraps the SDK's client (awshttp.NewBuildableClient(), or any Doer).
func Client(inner Doer) Doer { return client{inner} }

type client struct{ inner Doer }

func (c client) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = readOnly{req.Body}
	}
	return c.inner.Do(req)
}

// readOnly is a request body without WriteTo.
type readOnly struct{ io.ReadCloser }
