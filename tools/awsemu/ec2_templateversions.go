package awsemu

import (
	"slices"
	"strconv"
	"time"
)

// This file answers DescribeLaunchTemplateVersions: each template's one version, with the
// launch template data it was made with (as the launcher sends it).

type templateVersionXML struct {
	ID         string          `xml:"launchTemplateId"`
	Name       string          `xml:"launchTemplateName"`
	Version    int64           `xml:"versionNumber"`
	CreateTime string          `xml:"createTime"`
	CreatedBy  string          `xml:"createdBy"`
	Default    bool            `xml:"defaultVersion"`
	Data       templateDataXML `xml:"launchTemplateData"`
}

type templateDataXML struct {
	ImageID           string               `xml:"imageId,omitempty"`
	InstanceType      string               `xml:"instanceType,omitempty"`
	UserData          string               `xml:"userData,omitempty"`
	Profile           *profileSpecXML      `xml:"iamInstanceProfile,omitempty"`
	SecurityGroups    []string             `xml:"securityGroupIdSet>item"`
	BlockDevices      []blockDeviceXML     `xml:"blockDeviceMappingSet>item"`
	NetworkInterfaces []interfaceSpecXML   `xml:"networkInterfaceSet>item"`
	Metadata          metadataOptionsXML   `xml:"metadataOptions"`
	Monitoring        monitoringXML        `xml:"monitoring"`
	TagSpecs          []templateTagSpecXML `xml:"tagSpecificationSet>item"`
}

// profileSpecXML names an instance profile as the template did: by ARN or by name.
type profileSpecXML struct {
	Arn  string `xml:"arn,omitempty"`
	Name string `xml:"name,omitempty"`
}

type blockDeviceXML struct {
	DeviceName string `xml:"deviceName"`
	Ebs        struct {
		VolumeSize          int32  `xml:"volumeSize,omitempty"`
		VolumeType          string `xml:"volumeType,omitempty"`
		IOPS                int32  `xml:"iops,omitempty"`
		Throughput          int32  `xml:"throughput,omitempty"`
		Encrypted           *bool  `xml:"encrypted,omitempty"`
		DeleteOnTermination *bool  `xml:"deleteOnTermination,omitempty"`
		KMSKeyID            string `xml:"kmsKeyId,omitempty"`
		SnapshotID          string `xml:"snapshotId,omitempty"`
	} `xml:"ebs"`
}

type interfaceSpecXML struct {
	DeviceIndex              int      `xml:"deviceIndex"`
	AssociatePublicIPAddress *bool    `xml:"associatePublicIpAddress,omitempty"`
	Groups                   []string `xml:"groupSet>groupId"`
}

type metadataOptionsXML struct {
	State                   string `xml:"state"`
	HTTPEndpoint            string `xml:"httpEndpoint,omitempty"`
	HTTPProtocolIPv6        string `xml:"httpProtocolIpv6,omitempty"`
	HTTPPutResponseHopLimit int    `xml:"httpPutResponseHopLimit,omitempty"`
	HTTPTokens              string `xml:"httpTokens,omitempty"`
	InstanceMetadataTags    string `xml:"instanceMetadataTags,omitempty"`
}

type monitoringXML struct {
	Enabled bool `xml:"enabled"`
}

type templateTagSpecXML struct {
	ResourceType string `xml:"resourceType"`
	Tags         []Tag  `xml:"tagSet>item"`
}

type describeTemplateVersionsResp struct {
	ec2Resp
	Versions  []templateVersionXML `xml:"launchTemplateVersionSet>item"`
	NextToken string               `xml:"nextToken,omitempty"`
}

// The filters EC2 documents for DescribeLaunchTemplateVersions that a template here can
// answer.
var templateVersionFields = fieldFilters[*launchTemplate]{
	"image-id":             func(lt *launchTemplate) []string { return []string{lt.ImageID} },
	"instance-type":        func(lt *launchTemplate) []string { return []string{lt.InstanceType} },
	"iam-instance-profile": func(lt *launchTemplate) []string { return []string{lt.InstanceProfile} },
	"is-default-version":   func(*launchTemplate) []string { return []string{"true"} },
	"http-endpoint":        func(lt *launchTemplate) []string { return []string{lt.Metadata.HTTPEndpoint} },
	"http-tokens":          func(lt *launchTemplate) []string { return []string{lt.Metadata.HTTPTokens} },
}

// describeLaunchTemplateVersions: one template by id or name (every version, or those named:
// $Latest, $Default, 1), or, with neither, every template's $Latest or $Default version.
func (e *Emulator) describeLaunchTemplateVersions(req *ec2Request) (requestIDSetter, error) {
	f := req.Form
	fs := parseFilters(f)
	if err := validateFilters(fs, templateVersionFields, false); err != nil {
		return nil, err
	}
	pg, err := parsePage(f, 1, 200, 0)
	if err != nil {
		return nil, err
	}
	id, name, versions := f.Get("LaunchTemplateId"), f.Get("LaunchTemplateName"), list(f, "LaunchTemplateVersion")
	if id != "" && name != "" {
		return nil, &apiError{Status: 400, Code: "InvalidParameterCombination",
			Message: "The parameters launchTemplateId and launchTemplateName cannot be used together"}
	}
	for _, v := range versions {
		if v == "$Latest" || v == "$Default" {
			continue
		}
		if id == "" && name == "" {
			return nil, &apiError{Status: 400, Code: "MissingParameter",
				Message: "A launch template ID or name is required to describe version " + v}
		}
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 1 {
			return nil, errInvalidParameter("Value (%s) for parameter version is invalid", v)
		} else if n != 1 {
			return nil, errNotFound("InvalidLaunchTemplateId.VersionNotFound", "Could not find launch template version %d", n)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var all []*launchTemplate
	if id != "" || name != "" {
		lt, err := e.lookupTemplateLocked(id, name)
		if err != nil {
			return nil, err
		}
		all = []*launchTemplate{lt}
	} else {
		for _, lt := range e.templates {
			all = append(all, lt)
		}
		slices.SortFunc(all, func(a, b *launchTemplate) int { return cmpString(a.Name, b.Name) })
	}
	var hits []*launchTemplate
	for _, lt := range all {
		if ok, _ := matchFilters(lt, fs, templateVersionFields, nil); ok {
			hits = append(hits, lt)
		}
	}
	from, to, next := pg.cut(len(hits))
	out := &describeTemplateVersionsResp{NextToken: next}
	for _, lt := range hits[from:to] {
		out.Versions = append(out.Versions, e.templateVersionXML(lt))
	}
	return out, nil
}

func (e *Emulator) templateVersionXML(lt *launchTemplate) templateVersionXML {
	d := templateDataXML{ImageID: lt.ImageID, InstanceType: lt.InstanceType, UserData: lt.UserData,
		SecurityGroups: slices.Clone(lt.SecurityGroups), Monitoring: monitoringXML{Enabled: lt.Monitoring},
		Metadata: metadataOptionsXML{State: "applied", HTTPEndpoint: lt.Metadata.HTTPEndpoint, HTTPProtocolIPv6: lt.Metadata.HTTPProtocolIPv6,
			HTTPPutResponseHopLimit: lt.Metadata.HTTPPutResponseHopLimit, HTTPTokens: lt.Metadata.HTTPTokens, InstanceMetadataTags: lt.Metadata.InstanceMetadataTags}}
	if p := lt.InstanceProfile; p != "" {
		if isArn(p) {
			d.Profile = &profileSpecXML{Arn: p}
		} else {
			d.Profile = &profileSpecXML{Name: p}
		}
	}
	for _, b := range lt.BlockDevices {
		x := blockDeviceXML{DeviceName: b.DeviceName}
		x.Ebs.VolumeSize, x.Ebs.VolumeType, x.Ebs.IOPS, x.Ebs.Throughput = b.VolumeSizeGiB, b.VolumeType, b.IOPS, b.Throughput
		x.Ebs.Encrypted, x.Ebs.DeleteOnTermination, x.Ebs.KMSKeyID, x.Ebs.SnapshotID = b.Encrypted, b.DeleteOnTermination, b.KMSKeyID, b.SnapshotID
		d.BlockDevices = append(d.BlockDevices, x)
	}
	for _, ni := range lt.NetworkInterfaces {
		d.NetworkInterfaces = append(d.NetworkInterfaces, interfaceSpecXML{DeviceIndex: ni.DeviceIndex,
			AssociatePublicIPAddress: ni.AssociatePublicIPAddress, Groups: slices.Clone(ni.SecurityGroups)})
	}
	if len(lt.InstanceTags) > 0 {
		d.TagSpecs = []templateTagSpecXML{{ResourceType: "instance", Tags: slices.Clone(lt.InstanceTags)}}
	}
	return templateVersionXML{ID: lt.ID, Name: lt.Name, Version: 1, Default: true, Data: d,
		CreateTime: lt.Created.UTC().Format(time.RFC3339), CreatedBy: "arn:aws:iam::" + e.cfg.AccountID + ":root"}
}
