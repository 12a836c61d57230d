package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// ErrNotReady wraps a readiness answer other than 200.
var ErrNotReady = errors.New("not ready")

// HTTPOK is a readiness check for WaitFor: GET url (with a bearer token if given) must answer
// 200; otherwise the error carries the status and the start of the body. A nil client means a
// plain one with a 5 s timeout.
func HTTPOK(ctx context.Context, client *http.Client, url, token string) error {
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: %s answered %d: %s", ErrNotReady, url, resp.StatusCode, body)
	}
	return nil
}
