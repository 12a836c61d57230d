package awsemu

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// launchTemplate is a stored launch template. Only one version is kept: $Latest, $Default and
// "1" all name it.
type launchTemplate struct {
	ID, Name          string
	Created           time.Time
	Tags              []Tag // on the template itself
	ImageID           string
	InstanceType      string
	UserData          string // base64, as sent
	InstanceTags      []Tag  // TagSpecification with ResourceType=instance
	SecurityGroups    []string
	BlockDevices      []BlockDevice // LaunchTemplateData.BlockDeviceMapping.N
	InstanceProfile   string        // IamInstanceProfile: its name, or its ARN
	Metadata          MetadataOptions
	NetworkInterfaces []NetworkInterface
	Monitoring        bool // detailed (one-minute) monitoring
}

// MetadataOptions are a template's instance metadata settings; a field the request left out
// is "" (or 0), and EC2's default applies.
type MetadataOptions struct {
	HTTPEndpoint            string `json:"httpEndpoint,omitempty"`
	HTTPProtocolIPv6        string `json:"httpProtocolIpv6,omitempty"`
	HTTPPutResponseHopLimit int    `json:"httpPutResponseHopLimit,omitempty"`
	HTTPTokens              string `json:"httpTokens,omitempty"`
	InstanceMetadataTags    string `json:"instanceMetadataTags,omitempty"`
}

// NetworkInterface is one of a template's network interfaces.
type NetworkInterface struct {
	DeviceIndex              int      `json:"deviceIndex"`
	AssociatePublicIPAddress *bool    `json:"associatePublicIpAddress,omitempty"`
	SecurityGroups           []string `json:"securityGroups,omitempty"`
}

// LaunchTemplateInfo is a launch template as tests and the admin API see it.
type LaunchTemplateInfo struct {
	ID                string             `json:"id"`
	Name              string             `json:"name"`
	Tags              []Tag              `json:"tags,omitempty"`
	ImageID           string             `json:"imageId,omitempty"`
	InstanceType      string             `json:"instanceType,omitempty"`
	UserData          string             `json:"userData,omitempty"` // decoded
	BlockDevices      []BlockDevice      `json:"blockDevices,omitempty"`
	SecurityGroups    []string           `json:"securityGroups,omitempty"`
	InstanceProfile   string             `json:"instanceProfile,omitempty"`
	MetadataOptions   MetadataOptions    `json:"metadataOptions"`
	NetworkInterfaces []NetworkInterface `json:"networkInterfaces,omitempty"`
	Monitoring        bool               `json:"monitoring"`
}

// LaunchTemplates lists the launch templates, by name.
func (e *Emulator) LaunchTemplates() []LaunchTemplateInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]LaunchTemplateInfo, 0, len(e.templates))
	for _, lt := range e.templates {
		ud, _ := decodeUserData(lt.UserData) // checked when the template was made
		out = append(out, LaunchTemplateInfo{ID: lt.ID, Name: lt.Name, Tags: slices.Clone(lt.Tags), ImageID: lt.ImageID, InstanceType: lt.InstanceType,
			UserData: ud, BlockDevices: slices.Clone(lt.BlockDevices), SecurityGroups: slices.Clone(lt.SecurityGroups), InstanceProfile: lt.InstanceProfile, MetadataOptions: lt.Metadata,
			NetworkInterfaces: slices.Clone(lt.NetworkInterfaces), Monitoring: lt.Monitoring})
	}
	slices.SortFunc(out, func(a, b LaunchTemplateInfo) int { return cmpString(a.Name, b.Name) })
	return out
}

// parseTemplateData reads the instance profile, metadata options, network interfaces and
// monitoring of LaunchTemplateData, checking them as EC2 does.
func parseTemplateData(f url.Values, lt *launchTemplate) error {
	const p = "LaunchTemplateData."
	lt.InstanceProfile = cmp.Or(f.Get(p+"IamInstanceProfile.Arn"), f.Get(p+"IamInstanceProfile.Name"))
	if f.Get(p+"IamInstanceProfile.Arn") != "" && f.Get(p+"IamInstanceProfile.Name") != "" {
		return &apiError{Status: 400, Code: "InvalidParameterCombination", Message: "The parameter 'iamInstanceProfile.name' may not be used in combination with 'iamInstanceProfile.arn'"}
	}
	m := MetadataOptions{
		HTTPEndpoint: f.Get(p + "MetadataOptions.HttpEndpoint"), HTTPProtocolIPv6: f.Get(p + "MetadataOptions.HttpProtocolIpv6"),
		HTTPTokens: f.Get(p + "MetadataOptions.HttpTokens"), InstanceMetadataTags: f.Get(p + "MetadataOptions.InstanceMetadataTags"),
	}
	for param, v := range map[string]string{"HttpEndpoint": m.HTTPEndpoint, "HttpProtocolIpv6": m.HTTPProtocolIPv6, "InstanceMetadataTags": m.InstanceMetadataTags} {
		if v != "" && v != "enabled" && v != "disabled" {
			return errInvalidParameter("Value (%s) for parameter %s is invalid. Valid values are enabled and disabled.", v, param)
		}
	}
	if v := m.HTTPTokens; v != "" && v != "optional" && v != "required" {
		return errInvalidParameter("Value (%s) for parameter HttpTokens is invalid. Valid values are optional and required.", v)
	}
	if v := f.Get(p + "MetadataOptions.HttpPutResponseHopLimit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 64 {
			return errInvalidParameter("Value (%s) for parameter HttpPutResponseHopLimit is invalid. Valid values are 1 through 64.", v)
		}
		m.HTTPPutResponseHopLimit = n
	}
	lt.Metadata = m
	for _, n := range indices(f, p+"NetworkInterface") {
		np := fmt.Sprintf("%sNetworkInterface.%d.", p, n)
		ni := NetworkInterface{SecurityGroups: list(f, np+"SecurityGroupId")}
		idx, err := intParam(f, np+"DeviceIndex", -1)
		if err != nil {
			return err
		}
		if idx < 0 {
			return &apiError{Status: 400, Code: "MissingParameter", Message: "Missing required parameter: networkInterface.deviceIndex"}
		}
		ni.DeviceIndex = idx
		if v := f.Get(np + "AssociatePublicIpAddress"); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return errInvalidParameter("Value (%s) for parameter associatePublicIpAddress is invalid", v)
			}
			ni.AssociatePublicIPAddress = &b
		}
		lt.NetworkInterfaces = append(lt.NetworkInterfaces, ni)
	}
	if len(lt.NetworkInterfaces) > 0 && len(lt.SecurityGroups) > 0 {
		return &apiError{Status: 400, Code: "InvalidParameterCombination",
			Message: "Network interfaces and an instance-level security groups may not be specified on the same request"}
	}
	if v := f.Get(p + "Monitoring.Enabled"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errInvalidParameter("Value (%s) for parameter monitoring.enabled is invalid", v)
		}
		lt.Monitoring = b
	}
	return nil
}

// instanceGroups are the security groups an instance launched from the template gets: the
// primary network interface's when it has any, else the template's.
func (lt *launchTemplate) instanceGroups() []string {
	for _, ni := range lt.NetworkInterfaces {
		if ni.DeviceIndex == 0 && len(ni.SecurityGroups) > 0 {
			return slices.Clone(ni.SecurityGroups)
		}
	}
	return slices.Clone(lt.SecurityGroups)
}

type launchTemplateXML struct {
	ID             string `xml:"launchTemplateId"`
	Name           string `xml:"launchTemplateName"`
	CreateTime     string `xml:"createTime"`
	CreatedBy      string `xml:"createdBy"`
	DefaultVersion int64  `xml:"defaultVersionNumber"`
	LatestVersion  int64  `xml:"latestVersionNumber"`
	Tags           []Tag  `xml:"tagSet>item"`
}

func (e *Emulator) templateXML(lt *launchTemplate) launchTemplateXML {
	return launchTemplateXML{ID: lt.ID, Name: lt.Name, CreateTime: lt.Created.UTC().Format(time.RFC3339),
		CreatedBy: "arn:aws:iam::" + e.cfg.AccountID + ":root", DefaultVersion: 1, LatestVersion: 1, Tags: lt.Tags}
}

type createLaunchTemplateResp struct {
	ec2Resp
	Template launchTemplateXML `xml:"launchTemplate"`
}

func (e *Emulator) createLaunchTemplate(req *ec2Request) (requestIDSetter, error) {
	f := req.Form
	name := f.Get("LaunchTemplateName")
	if len(name) < 3 || len(name) > 128 {
		return nil, errInvalidParameter("launch template name %q must be 3 to 128 characters", name)
	}
	lt := &launchTemplate{
		Name:           name,
		Tags:           parseTagSpecs(f, "TagSpecification", "launch-template"),
		ImageID:        f.Get("LaunchTemplateData.ImageId"),
		InstanceType:   f.Get("LaunchTemplateData.InstanceType"),
		UserData:       f.Get("LaunchTemplateData.UserData"),
		InstanceTags:   parseTagSpecs(f, "LaunchTemplateData.TagSpecification", "instance"),
		SecurityGroups: list(f, "LaunchTemplateData.SecurityGroupId"),
	}
	var err error
	if lt.BlockDevices, err = parseBlockDevices(f, "LaunchTemplateData.BlockDeviceMapping"); err != nil {
		return nil, err
	}
	if err := parseTemplateData(f, lt); err != nil {
		return nil, err
	}
	if lt.ImageID != "" {
		if _, ok := e.world.imageByID(lt.ImageID); !ok {
			return nil, errNotFound("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", lt.ImageID)
		}
	}
	if lt.InstanceType != "" {
		if _, ok := e.world.instanceType(lt.InstanceType); !ok {
			return nil, errInvalidParameter("The instance type '%s' does not exist", lt.InstanceType)
		}
	}
	if _, err := decodeUserData(lt.UserData); err != nil {
		return nil, errInvalidParameter("Invalid BASE64 encoding of user data: %v", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, dup := e.ltByName[name]; dup {
		return nil, &apiError{Status: 400, Code: "InvalidLaunchTemplateName.AlreadyExistsException",
			Message: fmt.Sprintf("Launch template name already in use: %s", name)}
	}
	lt.ID = fmt.Sprintf("lt-%017x", e.rng.Uint64()&0xfffffffffffffff)
	lt.Created = e.cfg.Clock.Now()
	e.templates[lt.ID] = lt
	e.ltByName[name] = lt.ID
	return &createLaunchTemplateResp{Template: e.templateXML(lt)}, nil
}

type describeLaunchTemplatesResp struct {
	ec2Resp
	Templates []launchTemplateXML `xml:"launchTemplates>item"`
	NextToken string              `xml:"nextToken,omitempty"`
}

var templateFields = fieldFilters[*launchTemplate]{
	"launch-template-name": func(lt *launchTemplate) []string { return []string{lt.Name} },
}

func (e *Emulator) describeLaunchTemplates(req *ec2Request) (requestIDSetter, error) {
	fs := parseFilters(req.Form)
	if err := validateFilters(fs, templateFields, true); err != nil {
		return nil, err
	}
	pg, err := parsePage(req.Form, 1, 200, 0)
	if err != nil {
		return nil, err
	}
	ids, names := list(req.Form, "LaunchTemplateId"), list(req.Form, "LaunchTemplateName")
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, n := range names {
		if _, ok := e.ltByName[n]; !ok {
			return nil, errNotFound("InvalidLaunchTemplateName.NotFoundException",
				"At least one of the launch templates specified in the request does not exist.")
		}
	}
	for _, id := range ids {
		if _, ok := e.templates[id]; !ok {
			return nil, errNotFound("InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
		}
	}
	var all []*launchTemplate
	for _, lt := range e.templates {
		if len(ids) > 0 && !slices.Contains(ids, lt.ID) || len(names) > 0 && !slices.Contains(names, lt.Name) {
			continue
		}
		if ok, _ := matchFilters(lt, fs, templateFields, func(lt *launchTemplate) []Tag { return lt.Tags }); ok {
			all = append(all, lt)
		}
	}
	slices.SortFunc(all, func(a, b *launchTemplate) int { return cmpString(a.Name, b.Name) })
	from, to, next := pg.cut(len(all))
	out := &describeLaunchTemplatesResp{NextToken: next}
	for _, lt := range all[from:to] {
		out.Templates = append(out.Templates, e.templateXML(lt))
	}
	return out, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

type deleteLaunchTemplateResp struct {
	ec2Resp
	Template launchTemplateXML `xml:"launchTemplate"`
}

func (e *Emulator) deleteLaunchTemplate(req *ec2Request) (requestIDSetter, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	lt, err := e.lookupTemplateLocked(req.Form.Get("LaunchTemplateId"), req.Form.Get("LaunchTemplateName"))
	if err != nil {
		return nil, err
	}
	delete(e.templates, lt.ID)
	delete(e.ltByName, lt.Name)
	return &deleteLaunchTemplateResp{Template: e.templateXML(lt)}, nil
}

// lookupTemplateLocked finds a template by id or, failing that, by name.
func (e *Emulator) lookupTemplateLocked(id, name string) (*launchTemplate, error) {
	switch {
	case id != "":
		lt, ok := e.templates[id]
		if !ok {
			return nil, errNotFound("InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
		}
		return lt, nil
	case name != "":
		lid, ok := e.ltByName[name]
		if !ok {
			return nil, errNotFound("InvalidLaunchTemplateName.NotFoundException", "The specified launch template, with template name %s, does not exist.", name)
		}
		return e.templates[lid], nil
	}
	return nil, &apiError{Status: 400, Code: "MissingParameter", Message: "a launch template ID or name is required"}
}
