package awsemu

import (
	"slices"
	"strconv"
	"time"
)

// This file answers the read-only calls about the static world: zones, subnets, security
// groups and images.

type azXML struct {
	ZoneName    string `xml:"zoneName"`
	ZoneID      string `xml:"zoneId"`
	State       string `xml:"zoneState"`
	RegionName  string `xml:"regionName"`
	ZoneType    string `xml:"zoneType"`
	OptIn       string `xml:"optInStatus"`
	GroupName   string `xml:"groupName"`
	NetworkBord string `xml:"networkBorderGroup"`
}

type describeAZsResp struct {
	ec2Resp
	Zones []azXML `xml:"availabilityZoneInfo>item"`
}

var zoneFields = fieldFilters[zone]{
	"zone-name": func(z zone) []string { return []string{z.Name} },
	"zone-id":   func(z zone) []string { return []string{z.ID} },
	"state":     func(zone) []string { return []string{"available"} },
	"zone-type": func(zone) []string { return []string{"availability-zone"} },
}

func (e *Emulator) describeAvailabilityZones(req *ec2Request) (requestIDSetter, error) {
	fs := parseFilters(req.Form)
	if err := validateFilters(fs, zoneFields, false); err != nil {
		return nil, err
	}
	names := list(req.Form, "ZoneName")
	ids := list(req.Form, "ZoneId")
	out := &describeAZsResp{}
	for _, z := range e.world.zones {
		if len(names) > 0 && !slices.Contains(names, z.Name) || len(ids) > 0 && !slices.Contains(ids, z.ID) {
			continue
		}
		if ok, _ := matchFilters(z, fs, zoneFields, nil); !ok {
			continue
		}
		out.Zones = append(out.Zones, azXML{
			ZoneName: z.Name, ZoneID: z.ID, State: "available", RegionName: e.world.region,
			ZoneType: "availability-zone", OptIn: "opt-in-not-required", GroupName: e.world.region, NetworkBord: e.world.region,
		})
	}
	for _, n := range names {
		if !e.world.hasZone(n) {
			return nil, errInvalidParameter("Invalid availability zone: [%s]", n)
		}
	}
	return out, nil
}

type subnetXML struct {
	SubnetID         string `xml:"subnetId"`
	State            string `xml:"state"`
	VpcID            string `xml:"vpcId"`
	OwnerID          string `xml:"ownerId"`
	CIDR             string `xml:"cidrBlock"`
	AvailableIPs     int    `xml:"availableIpAddressCount"`
	AvailabilityZone string `xml:"availabilityZone"`
	ZoneID           string `xml:"availabilityZoneId"`
	DefaultForAz     bool   `xml:"defaultForAz"`
	MapPublicIP      bool   `xml:"mapPublicIpOnLaunch"`
	SubnetArn        string `xml:"subnetArn"`
	Tags             []Tag  `xml:"tagSet>item"`
}

type describeSubnetsResp struct {
	ec2Resp
	Subnets   []subnetXML `xml:"subnetSet>item"`
	NextToken string      `xml:"nextToken,omitempty"`
}

var subnetFields = fieldFilters[subnet]{
	"subnet-id":            func(s subnet) []string { return []string{s.ID} },
	"availability-zone":    func(s subnet) []string { return []string{s.Zone} },
	"availability-zone-id": func(s subnet) []string { return []string{s.ZoneID} },
	"cidr-block":           func(s subnet) []string { return []string{s.CIDR} },
	"state":                func(subnet) []string { return []string{"available"} },
}

func (e *Emulator) describeSubnets(req *ec2Request) (requestIDSetter, error) {
	fs := parseFilters(req.Form)
	fields := subnetFields
	if err := validateFilters(withoutVPC(fs), fields, true); err != nil {
		return nil, err
	}
	pg, err := parsePage(req.Form, 5, 1000, 0)
	if err != nil {
		return nil, err
	}
	ids := list(req.Form, "SubnetId")
	for _, id := range ids {
		if _, ok := e.world.subnetByID(id); !ok {
			return nil, errNotFound("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
		}
	}
	var all []subnetXML
	for _, s := range e.world.subnets {
		if len(ids) > 0 && !slices.Contains(ids, s.ID) {
			continue
		}
		if !e.vpcMatches(fs) {
			continue
		}
		if ok, _ := matchFilters(s, withoutVPC(fs), fields, func(s subnet) []Tag { return s.Tags }); !ok {
			continue
		}
		all = append(all, subnetXML{
			SubnetID: s.ID, State: "available", VpcID: e.world.vpcID, OwnerID: e.world.account, CIDR: s.CIDR,
			AvailableIPs: s.size, AvailabilityZone: s.Zone, ZoneID: s.ZoneID,
			SubnetArn: "arn:aws:ec2:" + e.world.region + ":" + e.world.account + ":subnet/" + s.ID, Tags: s.Tags,
		})
	}
	from, to, next := pg.cut(len(all))
	return &describeSubnetsResp{Subnets: all[from:to], NextToken: next}, nil
}

// withoutVPC drops vpc-id filters, which apply to every resource of the one VPC alike.
func withoutVPC(fs []filter) []filter {
	var out []filter
	for _, f := range fs {
		if f.Name != "vpc-id" {
			out = append(out, f)
		}
	}
	return out
}

func (e *Emulator) vpcMatches(fs []filter) bool {
	for _, f := range fs {
		if f.Name == "vpc-id" && !matchesAny(e.world.vpcID, f.Values) {
			return false
		}
	}
	return true
}

type securityGroupXML struct {
	OwnerID     string `xml:"ownerId"`
	GroupID     string `xml:"groupId"`
	GroupName   string `xml:"groupName"`
	Description string `xml:"groupDescription"`
	VpcID       string `xml:"vpcId"`
	Tags        []Tag  `xml:"tagSet>item"`
}

type describeSGsResp struct {
	ec2Resp
	Groups    []securityGroupXML `xml:"securityGroupInfo>item"`
	NextToken string             `xml:"nextToken,omitempty"`
}

var sgFields = fieldFilters[securityGroup]{
	"group-id":    func(g securityGroup) []string { return []string{g.ID} },
	"group-name":  func(g securityGroup) []string { return []string{g.Name} },
	"description": func(g securityGroup) []string { return []string{g.Description} },
}

func (e *Emulator) describeSecurityGroups(req *ec2Request) (requestIDSetter, error) {
	fs := parseFilters(req.Form)
	if err := validateFilters(withoutVPC(fs), sgFields, true); err != nil {
		return nil, err
	}
	pg, err := parsePage(req.Form, 5, 1000, 0)
	if err != nil {
		return nil, err
	}
	ids, names := list(req.Form, "GroupId"), list(req.Form, "GroupName")
	for _, id := range ids {
		if !slices.ContainsFunc(e.world.groups, func(g securityGroup) bool { return g.ID == id }) {
			return nil, errNotFound("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
		}
	}
	var all []securityGroupXML
	for _, g := range e.world.groups {
		if len(ids) > 0 && !slices.Contains(ids, g.ID) || len(names) > 0 && !slices.Contains(names, g.Name) {
			continue
		}
		if !e.vpcMatches(fs) {
			continue
		}
		if ok, _ := matchFilters(g, withoutVPC(fs), sgFields, func(g securityGroup) []Tag { return g.Tags }); !ok {
			continue
		}
		all = append(all, securityGroupXML{OwnerID: e.world.account, GroupID: g.ID, GroupName: g.Name,
			Description: g.Description, VpcID: e.world.vpcID, Tags: g.Tags})
	}
	from, to, next := pg.cut(len(all))
	return &describeSGsResp{Groups: all[from:to], NextToken: next}, nil
}

type imageXML struct {
	ImageID            string `xml:"imageId"`
	ImageLocation      string `xml:"imageLocation"`
	State              string `xml:"imageState"`
	OwnerID            string `xml:"imageOwnerId"`
	OwnerAlias         string `xml:"imageOwnerAlias,omitempty"`
	CreationDate       string `xml:"creationDate"`
	IsPublic           bool   `xml:"isPublic"`
	Architecture       string `xml:"architecture"`
	ImageType          string `xml:"imageType"`
	Name               string `xml:"name"`
	Description        string `xml:"description"`
	RootDeviceType     string `xml:"rootDeviceType"`
	RootDeviceName     string `xml:"rootDeviceName"`
	VirtualizationType string `xml:"virtualizationType"`
	Hypervisor         string `xml:"hypervisor"`
	PlatformDetails    string `xml:"platformDetails"`
	DeprecationTime    string `xml:"deprecationTime,omitempty"`
	Tags               []Tag  `xml:"tagSet>item"`
}

type describeImagesResp struct {
	ec2Resp
	Images    []imageXML `xml:"imagesSet>item"`
	NextToken string     `xml:"nextToken,omitempty"`
}

var imageFields = fieldFilters[image]{
	"image-id":            func(im image) []string { return []string{im.ID} },
	"name":                func(im image) []string { return []string{im.Name} },
	"description":         func(im image) []string { return []string{im.Description} },
	"architecture":        func(im image) []string { return []string{im.Arch} },
	"owner-id":            func(im image) []string { return []string{im.Owner} },
	"owner-alias":         func(im image) []string { return []string{im.OwnerAlias} },
	"state":               func(image) []string { return []string{"available"} },
	"image-type":          func(image) []string { return []string{"machine"} },
	"is-public":           func(im image) []string { return []string{strconv.FormatBool(im.OwnerAlias == "amazon")} },
	"virtualization-type": func(image) []string { return []string{"hvm"} },
	"root-device-type":    func(image) []string { return []string{"ebs"} },
}

func (e *Emulator) describeImages(req *ec2Request) (requestIDSetter, error) {
	fs := parseFilters(req.Form)
	if err := validateFilters(fs, imageFields, true); err != nil {
		return nil, err
	}
	pg, err := parsePage(req.Form, 5, 1000, 0)
	if err != nil {
		return nil, err
	}
	ids, owners := list(req.Form, "ImageId"), list(req.Form, "Owner")
	for _, id := range ids {
		if _, ok := e.world.imageByID(id); !ok {
			return nil, errNotFound("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id)
		}
	}
	var all []imageXML
	for _, im := range e.world.images {
		if len(ids) > 0 && !slices.Contains(ids, im.ID) {
			continue
		}
		if len(owners) > 0 && !slices.ContainsFunc(owners, func(o string) bool {
			return o == im.Owner || o == im.OwnerAlias && o != "" || o == "self" && im.Owner == e.world.account
		}) {
			continue
		}
		if ok, _ := matchFilters(im, fs, imageFields, func(im image) []Tag { return im.Tags }); !ok {
			continue
		}
		deprecation := ""
		if im.OwnerAlias == "amazon" {
			// Public AMIs are deprecated two years after they are made, as AWS sets it.
			deprecation = im.Created.AddDate(2, 0, 0).Format(time.RFC3339)
		}
		all = append(all, imageXML{
			ImageID: im.ID, ImageLocation: im.Owner + "/" + im.Name, State: "available", OwnerID: im.Owner,
			OwnerAlias: im.OwnerAlias, CreationDate: im.Created.Format(time.RFC3339), IsPublic: im.OwnerAlias == "amazon",
			Architecture: im.Arch, ImageType: "machine", Name: im.Name, Description: im.Description,
			RootDeviceType: "ebs", RootDeviceName: "/dev/xvda", VirtualizationType: "hvm", Hypervisor: "xen",
			PlatformDetails: "Linux/UNIX", DeprecationTime: deprecation, Tags: im.Tags,
		})
	}
	from, to, next := pg.cut(len(all))
	return &describeImagesResp{Images: all[from:to], NextToken: next}, nil
}
