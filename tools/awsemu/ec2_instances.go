package awsemu

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file answers DescribeInstances, TerminateInstances and CreateTags.

type stateXML struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

func stateOf(name string) stateXML { return stateXML{Code: stateCodes[name], Name: name} }

type groupXML struct {
	GroupID   string `xml:"groupId"`
	GroupName string `xml:"groupName"`
}

type instanceXML struct {
	InstanceID         string     `xml:"instanceId"`
	ImageID            string     `xml:"imageId"`
	State              stateXML   `xml:"instanceState"`
	PrivateDNSName     string     `xml:"privateDnsName"`
	DNSName            string     `xml:"dnsName"`
	InstanceType       string     `xml:"instanceType"`
	LaunchTime         string     `xml:"launchTime"`
	Zone               string     `xml:"placement>availabilityZone"`
	Tenancy            string     `xml:"placement>tenancy"`
	SubnetID           string     `xml:"subnetId"`
	VpcID              string     `xml:"vpcId"`
	PrivateIP          string     `xml:"privateIpAddress"`
	Architecture       string     `xml:"architecture"`
	InstanceLifecycle  string     `xml:"instanceLifecycle,omitempty"`
	RootDeviceType     string     `xml:"rootDeviceType"`
	VirtualizationType string     `xml:"virtualizationType"`
	Hypervisor         string     `xml:"hypervisor"`
	Groups             []groupXML `xml:"groupSet>item"`
	Tags               []Tag      `xml:"tagSet>item"`
	// IamInstanceProfile is the profile the instance was launched with; none: absent.
	IamInstanceProfile *instanceProfileRefXML `xml:"iamInstanceProfile,omitempty"`
}

type instanceProfileRefXML struct {
	Arn string `xml:"arn"`
	ID  string `xml:"id"`
}

type reservationXML struct {
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	Instances     []instanceXML `xml:"instancesSet>item"`
}

type describeInstancesResp struct {
	ec2Resp
	Reservations []reservationXML `xml:"reservationSet>item"`
	NextToken    string           `xml:"nextToken,omitempty"`
}

var instanceFields = fieldFilters[*instance]{
	"instance-id":         func(i *instance) []string { return []string{i.ID} },
	"instance-state-name": func(i *instance) []string { return []string{i.State} },
	"instance-state-code": func(i *instance) []string { return []string{strconv.Itoa(stateCodes[i.State])} },
	"instance-type":       func(i *instance) []string { return []string{i.Type} },
	"availability-zone":   func(i *instance) []string { return []string{i.Zone} },
	"subnet-id":           func(i *instance) []string { return []string{i.SubnetID} },
	"image-id":            func(i *instance) []string { return []string{i.ImageID} },
	"private-dns-name":    func(i *instance) []string { return []string{i.PrivateDNS} },
	"private-ip-address":  func(i *instance) []string { return []string{i.PrivateIP} },
	"instance-lifecycle": func(i *instance) []string {
		if i.CapacityType == CapacitySpot {
			return []string{"spot"}
		}
		return nil
	},
	"vpc-id": nil, // replaced in init: needs the world
}

func (e *Emulator) instanceXML(i *instance, now time.Time) instanceXML {
	x := instanceXML{
		InstanceID: i.ID, ImageID: i.ImageID, State: stateOf(i.State), PrivateDNSName: i.PrivateDNS,
		InstanceType: i.Type, LaunchTime: i.LaunchTime.Format(time.RFC3339), Zone: i.Zone, Tenancy: "default",
		SubnetID: i.SubnetID, VpcID: e.world.vpcID, PrivateIP: i.PrivateIP, RootDeviceType: "ebs",
		VirtualizationType: "hvm", Hypervisor: "xen", Tags: slices.Clone(i.shownTags(now)),
	}
	if t, ok := e.world.instanceType(i.Type); ok && t.Arch == "arm64" {
		x.Architecture = "arm64"
	} else {
		x.Architecture = "x86_64"
	}
	if i.CapacityType == CapacitySpot {
		x.InstanceLifecycle = "spot"
	}
	if i.profileArn != "" {
		x.IamInstanceProfile = &instanceProfileRefXML{Arn: i.profileArn, ID: i.profileID}
	}
	for _, g := range i.SecurityGroups {
		name := ""
		for _, wg := range e.world.groups {
			if wg.ID == g {
				name = wg.Name
			}
		}
		x.Groups = append(x.Groups, groupXML{GroupID: g, GroupName: name})
	}
	if i.State == StateTerminated {
		x.PrivateDNSName, x.PrivateIP = "", ""
	}
	return x
}

// checkInstanceIDs rejects malformed IDs before any lookup.
func checkInstanceIDs(ids []string) error {
	for _, id := range ids {
		if !strings.HasPrefix(id, "i-") || len(id) < 10 || len(id) > 19 {
			return &apiError{Status: 400, Code: "InvalidInstanceID.Malformed", Message: "Invalid id: \"" + id + "\""}
		}
	}
	return nil
}

func (e *Emulator) describeInstances(req *ec2Request) (requestIDSetter, error) {
	fs := parseFilters(req.Form)
	fields := fieldFilters[*instance]{}
	for k, v := range instanceFields {
		fields[k] = v
	}
	fields["vpc-id"] = func(*instance) []string { return []string{e.world.vpcID} }
	if err := validateFilters(fs, fields, true); err != nil {
		return nil, err
	}
	ids := list(req.Form, "InstanceId")
	if len(ids) > 0 && req.Form.Get("MaxResults") != "" {
		return nil, &apiError{Status: 400, Code: "InvalidParameterCombination",
			Message: "The parameter instancesSet cannot be used with the parameter maxResults"}
	}
	if err := checkInstanceIDs(ids); err != nil {
		return nil, err
	}
	pg, err := parsePage(req.Form, 5, 1000, 0)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked()
	now := e.cfg.Clock.Now()
	var matched []*instance
	if len(ids) > 0 {
		for _, id := range ids {
			inst, ok := e.instances[id]
			if !ok || !inst.shown(now) {
				return nil, errNotFound("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
			}
			matched = append(matched, inst)
		}
	} else {
		matched = e.order
	}
	tags := func(i *instance) []Tag { return i.shownTags(now) }
	var hits []*instance
	for _, inst := range matched {
		if !inst.shown(now) {
			continue
		}
		if ok, _ := matchFilters(inst, fs, fields, tags); ok {
			hits = append(hits, inst)
		}
	}
	from, to, next := pg.cut(len(hits))
	out := &describeInstancesResp{NextToken: next}
	for _, inst := range hits[from:to] {
		out.Reservations = append(out.Reservations, reservationXML{
			ReservationID: "r-" + strings.TrimPrefix(inst.ID, "i-"), OwnerID: e.cfg.AccountID,
			Instances: []instanceXML{e.instanceXML(inst, now)},
		})
	}
	return out, nil
}

type stateChangeXML struct {
	InstanceID string   `xml:"instanceId"`
	Current    stateXML `xml:"currentState"`
	Previous   stateXML `xml:"previousState"`
}

type terminateInstancesResp struct {
	ec2Resp
	Instances []stateChangeXML `xml:"instancesSet>item"`
}

// terminateInstances is idempotent: terminating a terminated instance reports it again.
func (e *Emulator) terminateInstances(req *ec2Request) (requestIDSetter, error) {
	ids := list(req.Form, "InstanceId")
	if len(ids) == 0 {
		return nil, &apiError{Status: 400, Code: "MissingParameter", Message: "The request must contain the parameter InstanceId"}
	}
	if len(ids) > 1000 {
		return nil, errInvalidParameter("at most 1000 instance IDs per call, got %d", len(ids))
	}
	if err := checkInstanceIDs(ids); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked()
	for _, id := range ids {
		if _, ok := e.instances[id]; !ok {
			return nil, errNotFound("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
		}
	}
	out := &terminateInstancesResp{}
	for _, id := range ids {
		inst := e.instances[id]
		prev := e.terminateLocked(inst)
		out.Instances = append(out.Instances, stateChangeXML{InstanceID: id, Current: stateOf(inst.State), Previous: stateOf(prev)})
	}
	return out, nil
}

type createTagsResp struct {
	ec2Resp
	Return bool `xml:"return"`
}

// createTags tags instances and launch templates; other resource IDs of the static world are
// accepted and ignored.
func (e *Emulator) createTags(req *ec2Request) (requestIDSetter, error) {
	ids := list(req.Form, "ResourceId")
	tags := parseTags(req.Form, "Tag")
	if len(ids) == 0 {
		return nil, &apiError{Status: 400, Code: "MissingParameter", Message: "The request must contain the parameter ResourceId"}
	}
	for _, t := range tags {
		if strings.HasPrefix(t.Key, "aws:") {
			return nil, errInvalidParameter("Tag keys starting with 'aws:' are reserved for internal use")
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range ids {
		switch {
		case strings.HasPrefix(id, "i-"):
			if _, ok := e.instances[id]; !ok {
				return nil, errNotFound("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
			}
		case strings.HasPrefix(id, "lt-"):
			if _, ok := e.templates[id]; !ok {
				return nil, errNotFound("InvalidLaunchTemplateId.NotFound", "The launch template ID '%s' does not exist", id)
			}
		}
	}
	for _, id := range ids {
		if inst, ok := e.instances[id]; ok {
			inst.Tags = setTags(inst.Tags, tags)
			e.noteTagsLocked(inst)
		}
		if lt, ok := e.templates[id]; ok {
			lt.Tags = setTags(lt.Tags, tags)
		}
	}
	return &createTagsResp{Return: true}, nil
}

// deleteTags removes tags from instances and launch templates: a Tag.N.Key alone removes the
// key, with Tag.N.Value only if the value matches, as EC2 does.
func (e *Emulator) deleteTags(req *ec2Request) (requestIDSetter, error) {
	ids := list(req.Form, "ResourceId")
	if len(ids) == 0 {
		return nil, &apiError{Status: 400, Code: "MissingParameter", Message: "The request must contain the parameter ResourceId"}
	}
	drop := map[string]*string{}
	for i := 1; ; i++ {
		key := req.Form.Get(fmt.Sprintf("Tag.%d.Key", i))
		if key == "" {
			break
		}
		if req.Form.Has(fmt.Sprintf("Tag.%d.Value", i)) {
			v := req.Form.Get(fmt.Sprintf("Tag.%d.Value", i))
			drop[key] = &v
		} else {
			drop[key] = nil
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	keep := func(tags []Tag) []Tag {
		return slices.DeleteFunc(tags, func(t Tag) bool {
			v, ok := drop[t.Key]
			return ok && (v == nil || *v == t.Value)
		})
	}
	for _, id := range ids {
		switch {
		case e.instances[id] != nil:
			e.instances[id].Tags = keep(e.instances[id].Tags)
			e.noteTagsLocked(e.instances[id])
		case e.templates[id] != nil:
			e.templates[id].Tags = keep(e.templates[id].Tags)
		case strings.HasPrefix(id, "i-"):
			return nil, errNotFound("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
		}
	}
	return &createTagsResp{Return: true}, nil
}
