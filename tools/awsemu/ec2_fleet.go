package awsemu

import (
	"cmp"
	"fmt"
	"math"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/fleetwright/fleetwright/pkg/catalog"
)

// This file answers CreateFleet (type instant only).
//
// Allocation model, per capacity type, one instance at a time:
//   - candidates are the overrides (type × subnet) whose pool still has capacity;
//   - on-demand "lowest-price": the cheapest on-demand price; "prioritized": lowest Priority;
//   - spot "price-capacity-optimized": keep the deep pools — remaining capacity at least half
//     of the deepest candidate's — and take the lowest modelled spot price among them;
//     "lowest-price": the lowest spot price; "capacity-optimized": the deepest pool;
//     "capacity-optimized-prioritized": the lowest Priority among the deep pools;
//   - ties go to the deeper pool, then to the override's position in the request.
// A pool that had no capacity when an instance was being placed is reported in errorSet as
// InsufficientInstanceCapacity (HTTP 200), as EC2 does for instant fleets.

const maxFleetCapacity = 1000

// override is one launch candidate: a template and an instance type in a subnet.
type override struct {
	cfgIndex     int
	lt           *launchTemplate
	ltVersion    string
	ltByID       bool
	instanceType catalog.InstanceType
	subnet       subnet
	imageID      string
	priority     float64
}

type fleetRecord struct {
	fingerprint string
	resp        createFleetResp // copied out: each caller gets its own request ID
}

type ltSpecXML struct {
	ID      string `xml:"launchTemplateId,omitempty"`
	Name    string `xml:"launchTemplateName,omitempty"`
	Version string `xml:"version"`
}

type overridesXML struct {
	InstanceType     string   `xml:"instanceType"`
	SubnetID         string   `xml:"subnetId"`
	AvailabilityZone string   `xml:"availabilityZone"`
	Priority         *float64 `xml:"priority,omitempty"`
	ImageID          string   `xml:"imageId,omitempty"`
}

type ltAndOverridesXML struct {
	Spec      ltSpecXML    `xml:"launchTemplateSpecification"`
	Overrides overridesXML `xml:"overrides"`
}

type fleetErrorXML struct {
	LTO       ltAndOverridesXML `xml:"launchTemplateAndOverrides"`
	Lifecycle string            `xml:"lifecycle"`
	Code      string            `xml:"errorCode"`
	Message   string            `xml:"errorMessage"`
}

type fleetInstanceXML struct {
	LTO          ltAndOverridesXML `xml:"launchTemplateAndOverrides"`
	Lifecycle    string            `xml:"lifecycle"`
	InstanceIDs  []string          `xml:"instanceIds>item"`
	InstanceType string            `xml:"instanceType"`
}

type createFleetResp struct {
	ec2Resp
	FleetID   string             `xml:"fleetId"`
	Errors    []fleetErrorXML    `xml:"errorSet>item"`
	Instances []fleetInstanceXML `xml:"fleetInstanceSet>item"`
}

func (o override) xml() ltAndOverridesXML {
	x := ltAndOverridesXML{Overrides: overridesXML{InstanceType: o.instanceType.Name, SubnetID: o.subnet.ID,
		AvailabilityZone: o.subnet.Zone, ImageID: o.imageID}}
	if o.ltByID {
		x.Spec.ID = o.lt.ID
	} else {
		x.Spec.Name = o.lt.Name
	}
	x.Spec.Version = o.ltVersion
	if o.priority != 0 {
		p := o.priority
		x.Overrides.Priority = &p
	}
	return x
}

func (o override) pool(capacityType string) Pool {
	return Pool{InstanceType: o.instanceType.Name, Zone: o.subnet.Zone, CapacityType: capacityType}
}

// fleetRequest is a decoded CreateFleet call.
type fleetRequest struct {
	token            string
	fingerprint      string
	spot, onDemand   int
	spotStrategy     string
	onDemandStrategy string
	tags             []Tag
	configs          []fleetConfig
	context          string // Context: the reserved capacity or Outpost context the fleet launches in
}

type fleetConfig struct {
	ltID, ltName, version string
	overrides             []url.Values // raw, resolved under the lock
}

func parseFleetRequest(f url.Values) (*fleetRequest, error) {
	if t := f.Get("Type"); t != "instant" {
		return nil, errInvalidParameter("only fleets of type instant are emulated, got %q", t)
	}
	r := &fleetRequest{token: f.Get("ClientToken"), tags: parseTagSpecs(f, "TagSpecification", "instance"), context: f.Get("Context")}
	total, err := intParam(f, "TargetCapacitySpecification.TotalTargetCapacity", 0)
	if err != nil {
		return nil, err
	}
	if total < 1 || total > maxFleetCapacity {
		return nil, errInvalidParameter("TotalTargetCapacity must be between 1 and %d, got %d", maxFleetCapacity, total)
	}
	od, err := intParam(f, "TargetCapacitySpecification.OnDemandTargetCapacity", -1)
	if err != nil {
		return nil, err
	}
	sp, err := intParam(f, "TargetCapacitySpecification.SpotTargetCapacity", -1)
	if err != nil {
		return nil, err
	}
	switch def := f.Get("TargetCapacitySpecification.DefaultTargetCapacityType"); def {
	case CapacitySpot:
		r.onDemand = max(od, 0)
		r.spot = total - r.onDemand
	case CapacityOnDemand, "":
		r.spot = max(sp, 0)
		r.onDemand = total - r.spot
	default:
		return nil, errInvalidParameter("DefaultTargetCapacityType %q is not spot or on-demand", def)
	}
	if r.spot < 0 || r.onDemand < 0 {
		return nil, errInvalidParameter("spot and on-demand targets exceed TotalTargetCapacity")
	}
	r.spotStrategy = cmp.Or(f.Get("SpotOptions.AllocationStrategy"), "lowest-price")
	r.onDemandStrategy = cmp.Or(f.Get("OnDemandOptions.AllocationStrategy"), "lowest-price")
	if !slices.Contains([]string{"lowest-price", "price-capacity-optimized", "capacity-optimized", "capacity-optimized-prioritized", "diversified"}, r.spotStrategy) {
		return nil, errInvalidParameter("unsupported spot allocation strategy %q", r.spotStrategy)
	}
	if !slices.Contains([]string{"lowest-price", "prioritized"}, r.onDemandStrategy) {
		return nil, errInvalidParameter("unsupported on-demand allocation strategy %q", r.onDemandStrategy)
	}
	for _, n := range indices(f, "LaunchTemplateConfigs") {
		p := fmt.Sprintf("LaunchTemplateConfigs.%d", n)
		c := fleetConfig{
			ltID:    f.Get(p + ".LaunchTemplateSpecification.LaunchTemplateId"),
			ltName:  f.Get(p + ".LaunchTemplateSpecification.LaunchTemplateName"),
			version: cmp.Or(f.Get(p+".LaunchTemplateSpecification.Version"), "$Default"),
		}
		for _, m := range indices(f, p+".Overrides") {
			op := fmt.Sprintf("%s.Overrides.%d.", p, m)
			v := url.Values{}
			for _, k := range []string{"InstanceType", "SubnetId", "AvailabilityZone", "Priority", "ImageId"} {
				v.Set(k, f.Get(op+k))
			}
			c.overrides = append(c.overrides, v)
		}
		r.configs = append(r.configs, c)
	}
	if len(r.configs) == 0 {
		return nil, &apiError{Status: 400, Code: "MissingParameter", Message: "The request must contain the parameter LaunchTemplateConfigs"}
	}
	r.fingerprint = fingerprint(f)
	return r, nil
}

// fingerprint is the request minus its token, to detect a reused token with other parameters.
func fingerprint(f url.Values) string {
	keys := make([]string, 0, len(f))
	for k := range f {
		if k != "ClientToken" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + strings.Join(f[k], ",") + "&")
	}
	return b.String()
}

func intParam(f url.Values, key string, def int) (int, error) {
	v := f.Get(key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, errInvalidParameter("%s: %q is not an integer", key, v)
	}
	return n, nil
}

// resolveOverridesLocked turns the request's configs into candidates, checking templates,
// types, subnets and images. Unknown names are errors of the whole call.
func (e *Emulator) resolveOverridesLocked(r *fleetRequest) ([]override, []fleetErrorXML, error) {
	var out []override
	var errs []fleetErrorXML
	for ci, c := range r.configs {
		lt, err := e.lookupTemplateLocked(c.ltID, c.ltName)
		if err != nil {
			return nil, nil, err
		}
		if !slices.Contains([]string{"$Latest", "$Default", "1"}, c.version) {
			return nil, nil, errNotFound("InvalidLaunchTemplateId.VersionNotFound", "Could not find launch template version %s", c.version)
		}
		ovs := c.overrides
		if len(ovs) == 0 {
			ovs = []url.Values{{"InstanceType": {lt.InstanceType}}}
		}
		for _, ov := range ovs {
			o := override{cfgIndex: ci, lt: lt, ltVersion: c.version, ltByID: c.ltID != ""}
			typeName := cmp.Or(ov.Get("InstanceType"), lt.InstanceType)
			t, ok := e.world.instanceType(typeName)
			if !ok {
				return nil, nil, errInvalidParameter("The instance type '%s' does not exist", typeName)
			}
			o.instanceType = t
			switch sid, z := ov.Get("SubnetId"), ov.Get("AvailabilityZone"); {
			case sid != "":
				s, ok := e.world.subnetByID(sid)
				if !ok {
					return nil, nil, errNotFound("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", sid)
				}
				if z != "" && z != s.Zone {
					return nil, nil, errInvalidParameter("subnet %s is in %s, not %s", sid, s.Zone, z)
				}
				o.subnet = s
			case z != "":
				s, ok := e.world.subnetInZone(z)
				if !ok {
					return nil, nil, errInvalidParameter("Invalid availability zone: [%s]", z)
				}
				o.subnet = s
			default:
				o.subnet = e.world.subnets[0]
			}
			if p := ov.Get("Priority"); p != "" {
				v, err := strconv.ParseFloat(p, 64)
				if err != nil {
					return nil, nil, errInvalidParameter("Priority %q is not a number", p)
				}
				o.priority = v
			}
			o.imageID = ov.Get("ImageId")
			imageID := cmp.Or(o.imageID, lt.ImageID)
			im, ok := e.world.imageByID(imageID)
			if !ok {
				return nil, nil, errNotFound("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", imageID)
			}
			if lt.InstanceProfile != "" && !e.profileExistsLocked(lt.InstanceProfile) {
				// EC2 checks the profile when it launches, so each override fails in errorSet.
				param := "iamInstanceProfile.name"
				if isArn(lt.InstanceProfile) {
					param = "iamInstanceProfile.arn"
				}
				errs = append(errs, fleetErrorXML{LTO: o.xml(), Code: "InvalidParameterValue",
					Message: fmt.Sprintf("Value (%s) for parameter %s is invalid. Invalid IAM Instance Profile name", lt.InstanceProfile, param)})
				continue
			}
			if (im.Arch == "arm64") != (t.Arch == "arm64") {
				errs = append(errs, fleetErrorXML{LTO: o.xml(), Code: "InvalidParameterValue",
					Message: fmt.Sprintf("The architecture '%s' of the specified instance type does not match the architecture '%s' of the specified AMI.", t.Arch, im.Arch)})
				continue
			}
			out = append(out, o)
		}
	}
	return out, errs, nil
}

func (e *Emulator) createFleet(req *ec2Request) (requestIDSetter, error) {
	r, err := parseFleetRequest(req.Form)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked()
	if r.token != "" {
		if rec, ok := e.fleets[r.token]; ok {
			if rec.fingerprint != r.fingerprint {
				return nil, &apiError{Status: 400, Code: "IdempotentParameterMismatch",
					Message: "The client token " + r.token + " was already used with different parameters"}
			}
			cp := rec.resp
			return &cp, nil
		}
	}
	cands, archErrs, err := e.resolveOverridesLocked(r)
	if err != nil {
		return nil, err
	}
	resp := &createFleetResp{FleetID: fmt.Sprintf("fleet-%08x-%04x-%04x-%04x-%012x", e.rng.Uint32(), e.rng.Uint32()&0xffff,
		e.rng.Uint32()&0xffff|0x4000, e.rng.Uint32()&0x3fff|0x8000, e.rng.Uint64()&0xffffffffffff)}
	for _, ae := range archErrs {
		for _, ct := range []string{CapacityOnDemand, CapacitySpot} {
			if r.count(ct) > 0 {
				ae.Lifecycle = ct
				resp.Errors = append(resp.Errors, ae)
			}
		}
	}
	for _, ct := range []string{CapacityOnDemand, CapacitySpot} {
		e.fillLocked(r, ct, cands, resp)
	}
	if r.token != "" {
		e.fleets[r.token] = &fleetRecord{fingerprint: r.fingerprint, resp: *resp}
	}
	return resp, nil
}

func (r *fleetRequest) count(capacityType string) int {
	if capacityType == CapacitySpot {
		return r.spot
	}
	return r.onDemand
}

// fillLocked launches up to the request's count of one capacity type, pool by pool as the
// allocation model chooses, and records exhausted pools in resp.Errors.
func (e *Emulator) fillLocked(r *fleetRequest, capacityType string, cands []override, resp *createFleetResp) {
	want := r.count(capacityType)
	if want == 0 {
		return
	}
	strategy := r.onDemandStrategy
	if capacityType == CapacitySpot {
		strategy = r.spotStrategy
	}
	exhausted := map[int]bool{}
	launched := map[int]*fleetInstanceXML{}
	var launchOrder []int
	for range want {
		best := -1
		deepest := 0
		for ci, c := range cands {
			rem := e.remainingLocked(c.pool(capacityType))
			if rem == 0 {
				exhausted[ci] = true
			}
			deepest = max(deepest, rem)
		}
		for ci, c := range cands {
			rem := e.remainingLocked(c.pool(capacityType))
			if rem == 0 {
				continue
			}
			if best < 0 || e.better(strategy, capacityType, c, rem, cands[best], e.remainingLocked(cands[best].pool(capacityType)), deepest) {
				best = ci
			}
		}
		if best < 0 {
			break
		}
		inst := e.newInstanceLocked(r, cands[best], capacityType, resp.FleetID)
		fi, ok := launched[best]
		if !ok {
			fi = &fleetInstanceXML{LTO: cands[best].xml(), Lifecycle: capacityType, InstanceType: inst.Type}
			launched[best] = fi
			launchOrder = append(launchOrder, best)
		}
		fi.InstanceIDs = append(fi.InstanceIDs, inst.ID)
	}
	for _, ci := range launchOrder {
		resp.Instances = append(resp.Instances, *launched[ci])
	}
	for ci := range cands {
		if exhausted[ci] {
			c := cands[ci]
			resp.Errors = append(resp.Errors, fleetErrorXML{LTO: c.xml(), Lifecycle: capacityType, Code: "InsufficientInstanceCapacity",
				Message: fmt.Sprintf("There is no %s capacity available that matches your request for %s in %s.", capacityType, c.instanceType.Name, c.subnet.Zone)})
		}
	}
}

// better reports whether candidate a (remaining ra) beats b (remaining rb) under strategy.
// Prices are the region's, as DescribeSpotPriceHistory and the Pricing API tell them; a type
// the region does not price comes last.
func (e *Emulator) better(strategy, capacityType string, a override, ra int, b override, rb int, deepest int) bool {
	price := func(o override) float64 {
		p, ok := 0.0, false
		if capacityType == CapacitySpot {
			p, ok = e.spotPrice(o.instanceType, o.subnet.Zone, spotStep(e.cfg.Clock.Now()))
		} else {
			p, ok = catalog.OnDemandPrice(e.world.region, o.instanceType.Name)
		}
		if !ok {
			return math.Inf(1)
		}
		return p
	}
	deep := func(r int) bool { return r*2 >= deepest }
	tie := func() bool { return ra > rb }
	switch strategy {
	case "prioritized":
		if a.priority != b.priority {
			return a.priority < b.priority
		}
	case "capacity-optimized":
		if ra != rb {
			return ra > rb
		}
		return false
	case "capacity-optimized-prioritized", "price-capacity-optimized":
		if deep(ra) != deep(rb) {
			return deep(ra)
		}
		if strategy == "capacity-optimized-prioritized" {
			if a.priority != b.priority {
				return a.priority < b.priority
			}
			return tie()
		}
	}
	if pa, pb := price(a), price(b); pa != pb {
		return pa < pb
	}
	return tie()
}

// newInstanceLocked launches one instance for a chosen candidate.
func (e *Emulator) newInstanceLocked(r *fleetRequest, c override, capacityType, fleetID string) *instance {
	ip, dns := e.allocateIPLocked(c.subnet)
	inst := &instance{
		Type: c.instanceType.Name, Zone: c.subnet.Zone, SubnetID: c.subnet.ID,
		ImageID: cmp.Or(c.imageID, c.lt.ImageID), CapacityType: capacityType,
		PrivateIP: ip, PrivateDNS: dns, UserData: c.lt.UserData, FleetID: fleetID,
		SecurityGroups: c.lt.instanceGroups(), InstanceProfile: c.lt.InstanceProfile, Context: r.context,
		BlockDevices: slices.Clone(c.lt.BlockDevices),
	}
	inst.profileArn, inst.profileID = e.profileRefLocked(c.lt.InstanceProfile)
	inst.Tags = setTags(slices.Clone(c.lt.InstanceTags), r.tags)
	inst.Tags = setTags(inst.Tags, []Tag{
		{Key: "aws:ec2:fleet-id", Value: fleetID},
		{Key: "aws:ec2launchtemplate:id", Value: c.lt.ID},
		{Key: "aws:ec2launchtemplate:version", Value: "1"},
	})
	e.launchLocked(inst)
	return inst
}
