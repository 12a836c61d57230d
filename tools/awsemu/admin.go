package awsemu

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The admin API, on the same server under /_emu/ (JSON in and out):
//
//	GET  /_emu/healthz    → {"ok":true}
//	POST /_emu/capacity   CapacityRule  {"instanceType":"m5.large","zone":"us-east-1a","capacityType":"spot","capacity":0}
//	POST /_emu/throttle   Throttle      {"service":"ec2","actions":["CreateFleet"],"share":1}
//	POST /_emu/interrupt  {"kind":"spot-interruption","instanceId":"i-...","state":"stopping","notice":"30s"}
//	GET  /_emu/instances  → [InstanceInfo]
//	POST /_emu/parameters {"name":"/my/ami","value":"ami-..."}  an SSM parameter of the account
//	POST /_emu/node-overhead {"memory":"2Gi","cpu":"500m"}  nodes registering from now on reserve
//	                      that much more than their type and kubelet settings say (an AMI whose
//	                      bootstrap reserves more than planned); {} stops it
//	GET  /_emu/calls      → [Call]
//	GET  /_emu/launch-templates  → [LaunchTemplateInfo]
//	GET  /_emu/instance-profiles → [InstanceProfileInfo]
//	GET  /_emu/roles             → [role name]
//	POST /_emu/consistency {"describeDelay":"20s"}  instances and tag changes show in DescribeInstances that late
//	POST /_emu/reset      forget instances, templates, queues' messages, parameters put, faults and calls; IAM back to its seed
const adminPrefix = "/_emu/"

// InterruptRequest is the wire form of Interruption: the notice is a Go duration string.
type InterruptRequest struct {
	Kind       string `json:"kind"`
	InstanceID string `json:"instanceId"`
	State      string `json:"state,omitempty"`
	Notice     string `json:"notice,omitempty"`
}

// ConsistencyRequest is the wire form of SetDescribeDelay: a Go duration string.
type ConsistencyRequest struct {
	DescribeDelay string `json:"describeDelay"`
}

// SetCapacity adds a capacity rule (see CapacityRule); capacity 0 makes the pools it matches
// answer InsufficientInstanceCapacity.
func (e *Emulator) SetCapacity(r CapacityRule) error {
	if r.Capacity < 0 {
		return fmt.Errorf("setting capacity: %d is negative", r.Capacity)
	}
	if r.CapacityType != "" && r.CapacityType != CapacitySpot && r.CapacityType != CapacityOnDemand {
		return fmt.Errorf("setting capacity: capacity type %q is not spot or on-demand", r.CapacityType)
	}
	if r.Zone != "" && !e.world.hasZone(r.Zone) {
		return fmt.Errorf("setting capacity: unknown zone %q", r.Zone)
	}
	if r.InstanceType != "" {
		if _, ok := e.world.instanceType(r.InstanceType); !ok {
			return fmt.Errorf("setting capacity: unknown instance type %q", r.InstanceType)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.capRules = append(e.capRules, r)
	return nil
}

// SetNodeOverhead makes the nodes that register from now on reserve this much beyond what their
// type and kubelet settings say, as a node image whose bootstrap reserves more than the
// scheduler's model; empty stops it.
func (e *Emulator) SetNodeOverhead(o corev1.ResourceList) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.nodeOverhead = o.DeepCopy()
}

// Calls returns the calls made so far (the most recent 10,000 at most).
func (e *Emulator) Calls() []Call {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.calls)
}

// Reset forgets all dynamic state, as if the emulator had just started.
func (e *Emulator) Reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, q := range e.queues {
		close(q.notify) // wake long pollers: they see their queue is gone
	}
	e.resetLocked()
}

func (e *Emulator) serveAdmin(w http.ResponseWriter, r *http.Request) {
	route := r.Method + " " + r.URL.Path[len(adminPrefix):]
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
	if err != nil {
		writeAdmin(w, http.StatusBadRequest, err)
		return
	}
	decode := func(v any) bool {
		if err := json.Unmarshal(body, v); err != nil {
			writeAdmin(w, http.StatusBadRequest, fmt.Errorf("decoding %s body: %w", route, err))
			return false
		}
		return true
	}
	switch route {
	case "GET healthz":
		writeAdmin(w, http.StatusOK, map[string]bool{"ok": true})
	case "POST capacity":
		var c CapacityRule
		if decode(&c) {
			writeAdminResult(w, e.SetCapacity(c))
		}
	case "POST throttle":
		var t Throttle
		if decode(&t) {
			writeAdminResult(w, e.SetThrottle(t))
		}
	case "POST interrupt":
		var in InterruptRequest
		if !decode(&in) {
			return
		}
		var notice time.Duration
		if in.Notice != "" {
			if notice, err = time.ParseDuration(in.Notice); err != nil {
				writeAdmin(w, http.StatusBadRequest, fmt.Errorf("decoding notice: %w", err))
				return
			}
		}
		writeAdminResult(w, e.Interrupt(Interruption{Kind: in.Kind, InstanceID: in.InstanceID, State: in.State, Notice: notice}))
	case "POST consistency":
		var c ConsistencyRequest
		if !decode(&c) {
			return
		}
		d, err := time.ParseDuration(c.DescribeDelay)
		if err != nil {
			writeAdmin(w, http.StatusBadRequest, fmt.Errorf("decoding describeDelay: %w", err))
			return
		}
		writeAdminResult(w, e.SetDescribeDelay(d))
	case "POST parameters":
		var p Parameter
		if decode(&p) {
			writeAdminResult(w, e.PutParameter(p.Name, p.Value))
		}
	case "POST node-overhead":
		var o corev1.ResourceList
		if decode(&o) {
			e.SetNodeOverhead(o)
			writeAdmin(w, http.StatusOK, map[string]bool{"ok": true})
		}
	case "GET instances":
		writeAdmin(w, http.StatusOK, e.Instances())
	case "GET calls":
		writeAdmin(w, http.StatusOK, e.Calls())
	case "GET launch-templates":
		writeAdmin(w, http.StatusOK, e.LaunchTemplates())
	case "GET instance-profiles":
		writeAdmin(w, http.StatusOK, e.InstanceProfiles())
	case "GET roles":
		writeAdmin(w, http.StatusOK, e.Roles())
	case "POST reset":
		e.Reset()
		writeAdmin(w, http.StatusOK, map[string]bool{"ok": true})
	default:
		writeAdmin(w, http.StatusNotFound, fmt.Errorf("no admin route %q", route))
	}
}

func writeAdminResult(w http.ResponseWriter, err error) {
	if err != nil {
		writeAdmin(w, http.StatusBadRequest, err)
		return
	}
	writeAdmin(w, http.StatusOK, map[string]bool{"ok": true})
}

func writeAdmin(w http.ResponseWriter, status int, v any) {
	if err, ok := v.(error); ok {
		v = map[string]string{"error": err.Error()}
	}
	buf, err := json.Marshal(v)
	if err != nil {
		status, buf = http.StatusInternalServerError, []byte(`{"error":"encoding response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf)
}
