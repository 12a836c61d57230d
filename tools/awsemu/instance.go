package awsemu

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// Instance states with their EC2 codes.
const (
	StatePending      = "pending"
	StateRunning      = "running"
	StateShuttingDown = "shutting-down"
	StateTerminated   = "terminated"
)

var stateCodes = map[string]int{StatePending: 0, StateRunning: 16, StateShuttingDown: 32, StateTerminated: 48, "stopping": 64, "stopped": 80}

// Capacity types, as fleets and Karpenter spell them.
const (
	CapacitySpot     = "spot"
	CapacityOnDemand = "on-demand"
)

// Pool is one capacity pool: an instance type in a zone bought one way.
type Pool struct {
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	CapacityType string `json:"capacityType"`
}

// CapacityRule sets the capacity of the pools it matches; an empty field matches anything.
// The last matching rule wins; pools no rule matches have Config.PoolCapacity.
type CapacityRule struct {
	Pool
	Capacity int `json:"capacity"`
}

func (r CapacityRule) matches(p Pool) bool {
	return (r.InstanceType == "" || r.InstanceType == p.InstanceType) &&
		(r.Zone == "" || r.Zone == p.Zone) &&
		(r.CapacityType == "" || r.CapacityType == p.CapacityType)
}

// remainingLocked is how many more instances the pool can start now.
func (e *Emulator) remainingLocked(p Pool) int {
	capacity := e.cfg.PoolCapacity
	for _, r := range slices.Backward(e.capRules) {
		if r.matches(p) {
			capacity = r.Capacity
			break
		}
	}
	return max(0, capacity-e.used[p])
}

// instance is one emulated EC2 instance.
type instance struct {
	ID, Type, Zone, SubnetID, ImageID, CapacityType string
	PrivateIP, PrivateDNS                           string
	State                                           string
	LaunchTime                                      time.Time
	Tags                                            []Tag
	UserData                                        string // base64
	BlockDevices                                    []BlockDevice
	SecurityGroups                                  []string
	FleetID                                         string
	InstanceProfile                                 string // from the launch template: a name or an ARN
	profileArn, profileID                           string // the profile's, resolved at launch ("": none)
	Context                                         string // the fleet's
	gone                                            bool   // dropped after retention
	// visibleAt and tagViews are what DescribeInstances shows of it when describes lag
	// (consistency.go); zero and nil: everything, at once.
	visibleAt time.Time
	tagViews  []tagView
}

func (i *instance) pool() Pool {
	return Pool{InstanceType: i.Type, Zone: i.Zone, CapacityType: i.CapacityType}
}

// setTags adds or replaces tags by key.
func setTags(tags []Tag, add []Tag) []Tag {
	for _, a := range add {
		i := slices.IndexFunc(tags, func(t Tag) bool { return t.Key == a.Key })
		if i >= 0 {
			tags[i].Value = a.Value
		} else {
			tags = append(tags, a)
		}
	}
	return tags
}

// allocateIPLocked gives the next private address of a subnet.
func (e *Emulator) allocateIPLocked(s subnet) (ip, dns string) {
	n := e.ipNext[s.ID]
	e.ipNext[s.ID] = n + 1
	base := binary.BigEndian.Uint32(s.base[:])
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], base+4+uint32(n%s.size))
	addr := netip.AddrFrom4(b)
	dashed := fmt.Sprintf("ip-%d-%d-%d-%d", b[0], b[1], b[2], b[3])
	if e.cfg.Region == "us-east-1" {
		return addr.String(), dashed + ".ec2.internal"
	}
	return addr.String(), dashed + "." + e.cfg.Region + ".compute.internal"
}

// launchLocked creates a pending instance and schedules its boot.
func (e *Emulator) launchLocked(inst *instance) {
	inst.ID = fmt.Sprintf("i-0%016x", e.rng.Uint64())
	inst.State = StatePending
	inst.LaunchTime = e.cfg.Clock.Now().UTC().Truncate(time.Second)
	e.instances[inst.ID] = inst
	e.order = append(e.order, inst)
	e.used[inst.pool()]++
	e.hideLocked(inst)
	e.afterLocked(e.cfg.BootDelay, func() {
		if inst.State != StatePending {
			return
		}
		inst.State = StateRunning
		if e.cfg.Registrar != nil {
			e.cfg.Registrar.Register(e.nodeSpec(inst))
		}
	})
}

// terminateLocked moves a live instance to shutting-down, frees its capacity and schedules
// termination, Node deletion and, after the retention, forgetting it. It returns the state
// before the call.
func (e *Emulator) terminateLocked(inst *instance) string {
	prev := inst.State
	if prev != StatePending && prev != StateRunning {
		return prev
	}
	inst.State = StateShuttingDown
	e.used[inst.pool()]--
	e.afterLocked(e.cfg.ShutdownDelay, func() {
		inst.State = StateTerminated
		if e.cfg.Registrar != nil && prev == StateRunning {
			e.afterLocked(e.cfg.NodeDeletionDelay, func() { e.cfg.Registrar.Deregister(inst.PrivateDNS) })
		}
		e.afterLocked(e.cfg.TerminatedRetention, func() { e.forgetLocked(inst) })
	})
	return prev
}

func (e *Emulator) forgetLocked(inst *instance) {
	if e.instances[inst.ID] != inst {
		return
	}
	delete(e.instances, inst.ID)
	inst.gone = true
	e.order = slices.DeleteFunc(e.order, func(i *instance) bool { return i.gone })
}

// InstanceInfo is an instance as the admin API lists it.
type InstanceInfo struct {
	ID           string    `json:"id"`
	Type         string    `json:"instanceType"`
	Zone         string    `json:"zone"`
	SubnetID     string    `json:"subnetId"`
	ImageID      string    `json:"imageId"`
	CapacityType string    `json:"capacityType"`
	State        string    `json:"state"`
	PrivateIP    string    `json:"privateIp"`
	PrivateDNS   string    `json:"privateDnsName"`
	LaunchTime   time.Time `json:"launchTime"`
	FleetID      string    `json:"fleetId"`
	Tags         []Tag     `json:"tags"`
	// InstanceProfile is the IAM instance profile it was launched with (name or ARN, as the
	// launch template gave it); Context the CreateFleet Context.
	InstanceProfile string   `json:"instanceProfile,omitempty"`
	Context         string   `json:"context,omitempty"`
	SecurityGroups  []string `json:"securityGroups,omitempty"`
}

// Instances lists every instance the emulator still knows, in launch order.
func (e *Emulator) Instances() []InstanceInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked()
	out := make([]InstanceInfo, 0, len(e.order))
	for _, i := range e.order {
		out = append(out, InstanceInfo{ID: i.ID, Type: i.Type, Zone: i.Zone, SubnetID: i.SubnetID, ImageID: i.ImageID,
			CapacityType: i.CapacityType, State: i.State, PrivateIP: i.PrivateIP, PrivateDNS: i.PrivateDNS,
			LaunchTime: i.LaunchTime, FleetID: i.FleetID, Tags: slices.Clone(i.Tags), InstanceProfile: i.InstanceProfile, Context: i.Context,
			SecurityGroups: slices.Clone(i.SecurityGroups)})
	}
	return out
}
