// Package client is a Go client for the AWS emulator's admin API (/_emu/ on the emulator's
// address), used by tests to inject faults and inspect what was launched and called.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/fleetwright/fleetwright/tools/awsemu"
)

// Client talks to one emulator.
type Client struct {
	base string
	http *http.Client
}

// New returns a client for the emulator at baseURL (e.g. http://127.0.0.1:4566).
func New(baseURL string) *Client {
	return &Client{base: strings.TrimSuffix(baseURL, "/"), http: &http.Client{Timeout: 30 * time.Second}}
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		buf, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encoding %s request: %w", path, err)
		}
		body = bytes.NewReader(buf)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+"/_emu/"+path, body)
	if err != nil {
		return fmt.Errorf("building %s request: %w", path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("calling %s: %w", path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("reading %s response: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		_ = json.Unmarshal(raw, &e)
		return fmt.Errorf("calling %s: %s: %s", path, resp.Status, e.Error)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("decoding %s response: %w", path, err)
		}
	}
	return nil
}

// SetCapacity sets how many instances the pools matching rule can hold (0 = ICE).
func (c *Client) SetCapacity(ctx context.Context, rule awsemu.CapacityRule) error {
	return c.do(ctx, http.MethodPost, "capacity", rule, nil)
}

// Throttle replaces the throttling rule; the zero Throttle stops throttling.
func (c *Client) Throttle(ctx context.Context, t awsemu.Throttle) error {
	return c.do(ctx, http.MethodPost, "throttle", t, nil)
}

// Interrupt sends an interruption event of kind (awsemu.Kind*) for an instance to the
// interruption queue.
func (c *Client) Interrupt(ctx context.Context, kind, instanceID string) error {
	return c.InterruptWith(ctx, awsemu.Interruption{Kind: kind, InstanceID: instanceID})
}

// InterruptWith sends an interruption with its options (state, notice).
func (c *Client) InterruptWith(ctx context.Context, in awsemu.Interruption) error {
	req := awsemu.InterruptRequest{Kind: in.Kind, InstanceID: in.InstanceID, State: in.State}
	if in.Notice != 0 {
		req.Notice = in.Notice.String()
	}
	return c.do(ctx, http.MethodPost, "interrupt", req, nil)
}

// SetDescribeDelay makes instances launched, and tags changed, from now on show in
// DescribeInstances that long after they exist (EC2's eventual consistency); 0 is at once.
func (c *Client) SetDescribeDelay(ctx context.Context, d time.Duration) error {
	return c.do(ctx, http.MethodPost, "consistency", awsemu.ConsistencyRequest{DescribeDelay: d.String()}, nil)
}

// PutParameter creates or overwrites an SSM parameter of the emulated account.
func (c *Client) PutParameter(ctx context.Context, name, value string) error {
	return c.do(ctx, http.MethodPost, "parameters", awsemu.Parameter{Name: name, Value: value}, nil)
}

// SetNodeOverhead makes the nodes registering from now on reserve this much more than planned
// (see awsemu.Emulator.SetNodeOverhead); an empty list stops it.
func (c *Client) SetNodeOverhead(ctx context.Context, o corev1.ResourceList) error {
	if o == nil {
		o = corev1.ResourceList{}
	}
	return c.do(ctx, http.MethodPost, "node-overhead", o, nil)
}

// Instances lists the emulator's instances in launch order.
func (c *Client) Instances(ctx context.Context) ([]awsemu.InstanceInfo, error) {
	var out []awsemu.InstanceInfo
	return out, c.do(ctx, http.MethodGet, "instances", nil, &out)
}

// Calls lists the API calls the emulator has answered.
func (c *Client) Calls(ctx context.Context) ([]awsemu.Call, error) {
	var out []awsemu.Call
	return out, c.do(ctx, http.MethodGet, "calls", nil, &out)
}

// LaunchTemplates lists the emulator's launch templates with every field it records (user
// data decoded).
func (c *Client) LaunchTemplates(ctx context.Context) ([]awsemu.LaunchTemplateInfo, error) {
	var out []awsemu.LaunchTemplateInfo
	return out, c.do(ctx, http.MethodGet, "launch-templates", nil, &out)
}

// InstanceProfiles lists the emulator's IAM instance profiles with their role and tags.
func (c *Client) InstanceProfiles(ctx context.Context) ([]awsemu.InstanceProfileInfo, error) {
	var out []awsemu.InstanceProfileInfo
	return out, c.do(ctx, http.MethodGet, "instance-profiles", nil, &out)
}

// Roles lists the names of the emulator's IAM roles.
func (c *Client) Roles(ctx context.Context) ([]string, error) {
	var out []string
	return out, c.do(ctx, http.MethodGet, "roles", nil, &out)
}

// Reset forgets all dynamic state.
func (c *Client) Reset(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "reset", nil, nil)
}

// Healthy reports whether the emulator answers.
func (c *Client) Healthy(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "healthz", nil, nil)
}
