package awsemu

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"fmt"
	"log"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file answers IAM's query protocol (Action=...&Version=2010-05-08, XML responses) for
// the roles and instance profiles a node class launches with: CreateRole, GetRole,
// CreateInstanceProfile, GetInstanceProfile, DeleteInstanceProfile, AddRoleToInstanceProfile,
// RemoveRoleFromInstanceProfile, TagInstanceProfile, ListInstanceProfiles. IAM is global: one
// set per emulator, whatever the region. Requests are told from EC2's by the service of their
// SigV4 credential scope (sigV4Service).

const iamNamespace = "https://iam.amazonaws.com/doc/2010-05-08/"

// iamRole is an IAM role.
type iamRole struct {
	Name, ID, Path   string
	AssumeRolePolicy string
	Created          time.Time
}

// instanceProfile is an IAM instance profile: at most one role.
type instanceProfile struct {
	Name, ID, Path string
	Created        time.Time
	Role           string // "" for none
	Tags           []Tag
}

// seedIAMLocked creates the roles and instance profiles of the configuration.
func (e *Emulator) seedIAMLocked() {
	e.roles = map[string]*iamRole{}
	e.profiles = map[string]*instanceProfile{}
	for _, name := range e.cfg.Roles {
		e.roles[name] = &iamRole{Name: name, ID: e.iamIDLocked("AROA"), Path: "/", Created: e.cfg.Clock.Now(),
			AssumeRolePolicy: `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`}
	}
	for name, role := range e.cfg.InstanceProfiles {
		e.profiles[name] = &instanceProfile{Name: name, ID: e.iamIDLocked("AIPA"), Path: "/", Created: e.cfg.Clock.Now(), Role: role}
	}
}

// iamIDLocked is a unique id of the kind IAM gives (AROA… roles, AIPA… instance profiles).
func (e *Emulator) iamIDLocked(prefix string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	var b strings.Builder
	b.WriteString(prefix)
	for range 17 {
		b.WriteByte(alphabet[e.rng.IntN(len(alphabet))])
	}
	return b.String()
}

// sigV4Service is the service of a request's SigV4 credential scope
// (Credential=AKID/20260101/us-east-1/iam/aws4_request), "" if it has none.
func sigV4Service(r *http.Request) string {
	cred := r.URL.Query().Get("X-Amz-Credential")
	if auth := r.Header.Get("Authorization"); auth != "" {
		_, rest, ok := strings.Cut(auth, "Credential=")
		if !ok {
			return ""
		}
		cred, _, _ = strings.Cut(rest, ",")
	}
	parts := strings.Split(strings.TrimSpace(cred), "/")
	if len(parts) != 5 {
		return ""
	}
	return parts[3]
}

type iamHandler func(e *Emulator, f url.Values) (any, error)

// iamActions maps each supported Action to its handler; a nil result means an empty Result.
var iamActions map[string]iamHandler

func init() {
	iamActions = map[string]iamHandler{
		"CreateRole":                    (*Emulator).createRole,
		"GetRole":                       (*Emulator).getRole,
		"CreateInstanceProfile":         (*Emulator).createInstanceProfile,
		"GetInstanceProfile":            (*Emulator).getInstanceProfile,
		"DeleteInstanceProfile":         (*Emulator).deleteInstanceProfile,
		"AddRoleToInstanceProfile":      (*Emulator).addRoleToInstanceProfile,
		"RemoveRoleFromInstanceProfile": (*Emulator).removeRoleFromInstanceProfile,
		"TagInstanceProfile":            (*Emulator).tagInstanceProfile,
		"ListInstanceProfiles":          (*Emulator).listInstanceProfiles,
	}
}

func (e *Emulator) serveIAM(w http.ResponseWriter, r *http.Request, reqID string) {
	req, err := decodeEC2Form(r) // the same query protocol as EC2's
	if err != nil {
		e.record(Call{Service: "iam", ErrorCode: errorCode(err)})
		writeIAMError(w, reqID, err)
		return
	}
	if e.throttled("iam", req.Action) {
		e.record(Call{Service: "iam", Action: req.Action, ErrorCode: "Throttling", Throttled: true})
		writeIAMError(w, reqID, &apiError{Status: 400, Code: "Throttling", Message: "Rate exceeded"})
		return
	}
	h, ok := iamActions[req.Action]
	if !ok {
		err := &apiError{Status: 400, Code: "InvalidAction", Message: fmt.Sprintf("Could not find operation %s for version 2010-05-08", req.Action)}
		e.record(Call{Service: "iam", Action: req.Action, ErrorCode: err.Code})
		writeIAMError(w, reqID, err)
		return
	}
	result, err := h(e, req.Form)
	e.record(Call{Service: "iam", Action: req.Action, ErrorCode: errorCode(err)})
	if err != nil {
		writeIAMError(w, reqID, err)
		return
	}
	type metadata struct {
		RequestID string `xml:"RequestId"`
	}
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	enc := xml.NewEncoder(&buf)
	start := xml.StartElement{Name: xml.Name{Local: req.Action + "Response"}, Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: iamNamespace}}}
	err = enc.EncodeToken(start)
	if err == nil && result != nil {
		err = enc.EncodeElement(result, xml.StartElement{Name: xml.Name{Local: req.Action + "Result"}})
	}
	if err == nil {
		err = enc.EncodeElement(metadata{RequestID: reqID}, xml.StartElement{Name: xml.Name{Local: "ResponseMetadata"}})
	}
	if err == nil {
		err = enc.EncodeToken(start.End())
	}
	if err == nil {
		err = enc.Flush()
	}
	if err != nil {
		log.Printf("awsemu: encoding %s response: %v", req.Action, err)
		writeIAMError(w, reqID, &apiError{Status: 500, Code: "ServiceFailure", Message: "encoding response"})
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	_, _ = w.Write(buf.Bytes())
}

type iamErrorXML struct {
	XMLName   xml.Name `xml:"ErrorResponse"`
	Xmlns     string   `xml:"xmlns,attr"`
	Type      string   `xml:"Error>Type"`
	Code      string   `xml:"Error>Code"`
	Message   string   `xml:"Error>Message"`
	RequestID string   `xml:"RequestId"`
}

// writeIAMError writes IAM's ErrorResponse; Type is Receiver for the service's own faults.
func writeIAMError(w http.ResponseWriter, reqID string, err error) {
	ae := &apiError{Status: 500, Code: "ServiceFailure", Message: err.Error()}
	if a, ok := err.(*apiError); ok {
		ae = a
	}
	kind := "Sender"
	if ae.Status >= 500 {
		kind = "Receiver"
	}
	out, mErr := xml.Marshal(iamErrorXML{Xmlns: iamNamespace, Type: kind, Code: ae.Code, Message: ae.Message, RequestID: reqID})
	if mErr != nil {
		out = []byte("<ErrorResponse><Error><Code>ServiceFailure</Code></Error></ErrorResponse>")
	}
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(ae.Status)
	_, _ = w.Write(append([]byte(xml.Header), out...))
}

func errNoSuchEntity(format string, args ...any) *apiError {
	return &apiError{Status: 404, Code: "NoSuchEntity", Message: fmt.Sprintf(format, args...)}
}

func errIAMValidation(format string, args ...any) *apiError {
	return &apiError{Status: 400, Code: "ValidationError", Message: fmt.Sprintf(format, args...)}
}

var iamNameRE = regexp.MustCompile(`^[\w+=,.@-]+$`)

// iamName checks a role or instance profile name (IAM's pattern, 1 to max characters).
func iamName(f url.Values, param string, maxLen int) (string, error) {
	v := f.Get(param)
	switch {
	case v == "":
		return "", errIAMValidation("1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", lowerFirst(param))
	case len(v) > maxLen || !iamNameRE.MatchString(v):
		return "", errIAMValidation("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]+ and have length less than or equal to %d",
			v, lowerFirst(param), maxLen)
	}
	return v, nil
}

// iamPath checks a Path: "/" by default, else starting and ending with "/".
func iamPath(f url.Values, param string) (string, error) {
	p := f.Get(param)
	if p == "" {
		return "/", nil
	}
	if !strings.HasPrefix(p, "/") || !strings.HasSuffix(p, "/") || len(p) > 512 {
		return "", errIAMValidation("The specified value for %s is invalid. It must begin and end with / and contain only alphanumeric characters and/or / characters.", lowerFirst(param))
	}
	return p, nil
}

func lowerFirst(s string) string { return strings.ToLower(s[:1]) + s[1:] }

// iamTags reads Tags.member.N.{Key,Value}.
func iamTags(f url.Values) ([]Tag, error) {
	var out []Tag
	for _, n := range indices(f, "Tags.member") {
		p := fmt.Sprintf("Tags.member.%d.", n)
		k := f.Get(p + "Key")
		if k == "" || len(k) > 128 || len(f.Get(p+"Value")) > 256 {
			return nil, errIAMValidation("tag %d: keys are 1 to 128 characters, values at most 256", n)
		}
		out = setTags(out, []Tag{{Key: k, Value: f.Get(p + "Value")}})
	}
	if len(out) > 50 {
		return nil, &apiError{Status: 409, Code: "LimitExceeded", Message: "The number of tags has reached the maximum limit of 50."}
	}
	return out, nil
}

// The wire forms.

type iamTagXML struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type roleXML struct {
	Path                     string `xml:"Path"`
	RoleName                 string `xml:"RoleName"`
	RoleID                   string `xml:"RoleId"`
	Arn                      string `xml:"Arn"`
	CreateDate               string `xml:"CreateDate"`
	AssumeRolePolicyDocument string `xml:"AssumeRolePolicyDocument"`
}

type instanceProfileXML struct {
	Path                string      `xml:"Path"`
	InstanceProfileName string      `xml:"InstanceProfileName"`
	InstanceProfileID   string      `xml:"InstanceProfileId"`
	Arn                 string      `xml:"Arn"`
	CreateDate          string      `xml:"CreateDate"`
	Roles               []roleXML   `xml:"Roles>member"`
	Tags                []iamTagXML `xml:"Tags>member,omitempty"`
}

func (e *Emulator) roleArn(r *iamRole) string {
	return "arn:aws:iam::" + e.cfg.AccountID + ":role" + r.Path + r.Name
}

func (e *Emulator) roleXML(r *iamRole) roleXML {
	return roleXML{Path: r.Path, RoleName: r.Name, RoleID: r.ID, Arn: e.roleArn(r), CreateDate: r.Created.UTC().Format(time.RFC3339),
		AssumeRolePolicyDocument: url.QueryEscape(r.AssumeRolePolicy)}
}

// profileXMLLocked renders a profile with its role and, unless listing (IAM's list calls
// leave tags out), its tags.
func (e *Emulator) profileXMLLocked(p *instanceProfile, withTags bool) instanceProfileXML {
	x := instanceProfileXML{Path: p.Path, InstanceProfileName: p.Name, InstanceProfileID: p.ID,
		Arn: e.profileArn(p), CreateDate: p.Created.UTC().Format(time.RFC3339), Roles: []roleXML{}}
	if r, ok := e.roles[p.Role]; ok {
		x.Roles = append(x.Roles, e.roleXML(r))
	}
	if withTags {
		for _, t := range p.Tags {
			x.Tags = append(x.Tags, iamTagXML(t))
		}
	}
	return x
}

// The actions.

type roleResult struct {
	Role roleXML `xml:"Role"`
}

func (e *Emulator) createRole(f url.Values) (any, error) {
	name, err := iamName(f, "RoleName", 64)
	if err != nil {
		return nil, err
	}
	path, err := iamPath(f, "Path")
	if err != nil {
		return nil, err
	}
	doc := f.Get("AssumeRolePolicyDocument")
	if doc == "" {
		return nil, errIAMValidation("1 validation error detected: Value null at 'assumeRolePolicyDocument' failed to satisfy constraint: Member must not be null")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, dup := e.roles[name]; dup {
		return nil, &apiError{Status: 409, Code: "EntityAlreadyExists", Message: fmt.Sprintf("Role with name %s already exists.", name)}
	}
	r := &iamRole{Name: name, ID: e.iamIDLocked("AROA"), Path: path, AssumeRolePolicy: doc, Created: e.cfg.Clock.Now()}
	e.roles[name] = r
	return &roleResult{Role: e.roleXML(r)}, nil
}

func (e *Emulator) getRole(f url.Values) (any, error) {
	name, err := iamName(f, "RoleName", 64)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.roles[name]
	if !ok {
		return nil, errNoSuchEntity("The role with name %s cannot be found.", name)
	}
	return &roleResult{Role: e.roleXML(r)}, nil
}

type profileResult struct {
	InstanceProfile instanceProfileXML `xml:"InstanceProfile"`
}

func (e *Emulator) createInstanceProfile(f url.Values) (any, error) {
	name, err := iamName(f, "InstanceProfileName", 128)
	if err != nil {
		return nil, err
	}
	path, err := iamPath(f, "Path")
	if err != nil {
		return nil, err
	}
	tags, err := iamTags(f)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, dup := e.profiles[name]; dup {
		return nil, &apiError{Status: 409, Code: "EntityAlreadyExists", Message: fmt.Sprintf("Instance Profile %s already exists.", name)}
	}
	p := &instanceProfile{Name: name, ID: e.iamIDLocked("AIPA"), Path: path, Created: e.cfg.Clock.Now(), Tags: tags}
	e.profiles[name] = p
	return &profileResult{InstanceProfile: e.profileXMLLocked(p, true)}, nil
}

// profileLocked finds the profile the request names.
func (e *Emulator) profileLocked(f url.Values) (*instanceProfile, error) {
	name, err := iamName(f, "InstanceProfileName", 128)
	if err != nil {
		return nil, err
	}
	p, ok := e.profiles[name]
	if !ok {
		return nil, errNoSuchEntity("Instance Profile %s cannot be found.", name)
	}
	return p, nil
}

// withProfile runs fn, under the lock, on the instance profile the request names.
func (e *Emulator) withProfile(f url.Values, fn func(p *instanceProfile) (any, error)) (any, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, err := e.profileLocked(f)
	if err != nil {
		return nil, err
	}
	return fn(p)
}

func (e *Emulator) getInstanceProfile(f url.Values) (any, error) {
	return e.withProfile(f, func(p *instanceProfile) (any, error) {
		return &profileResult{InstanceProfile: e.profileXMLLocked(p, true)}, nil
	})
}

func (e *Emulator) deleteInstanceProfile(f url.Values) (any, error) {
	return e.withProfile(f, func(p *instanceProfile) (any, error) {
		if p.Role != "" {
			return nil, &apiError{Status: 409, Code: "DeleteConflict", Message: "Cannot delete entity, must remove roles from instance profile first."}
		}
		delete(e.profiles, p.Name)
		return nil, nil
	})
}

func (e *Emulator) addRoleToInstanceProfile(f url.Values) (any, error) {
	role, err := iamName(f, "RoleName", 64)
	if err != nil {
		return nil, err
	}
	return e.withProfile(f, func(p *instanceProfile) (any, error) {
		if _, ok := e.roles[role]; !ok {
			return nil, errNoSuchEntity("The role with name %s cannot be found.", role)
		}
		if p.Role != "" {
			return nil, &apiError{Status: 409, Code: "LimitExceeded", Message: "Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1"}
		}
		p.Role = role
		return nil, nil
	})
}

func (e *Emulator) removeRoleFromInstanceProfile(f url.Values) (any, error) {
	role, err := iamName(f, "RoleName", 64)
	if err != nil {
		return nil, err
	}
	return e.withProfile(f, func(p *instanceProfile) (any, error) {
		if p.Role != role {
			return nil, errNoSuchEntity("The role with name %s cannot be found in instance profile %s.", role, p.Name)
		}
		p.Role = ""
		return nil, nil
	})
}

func (e *Emulator) tagInstanceProfile(f url.Values) (any, error) {
	tags, err := iamTags(f)
	if err != nil {
		return nil, err
	}
	if len(tags) == 0 {
		return nil, errIAMValidation("1 validation error detected: Value null at 'tags' failed to satisfy constraint: Member must not be null")
	}
	return e.withProfile(f, func(p *instanceProfile) (any, error) {
		merged := setTags(slices.Clone(p.Tags), tags)
		if len(merged) > 50 {
			return nil, &apiError{Status: 409, Code: "LimitExceeded", Message: "The number of tags has reached the maximum limit of 50."}
		}
		p.Tags = merged
		return nil, nil
	})
}

type listProfilesResult struct {
	InstanceProfiles []instanceProfileXML `xml:"InstanceProfiles>member"`
	IsTruncated      bool                 `xml:"IsTruncated"`
	Marker           string               `xml:"Marker,omitempty"`
}

// listInstanceProfiles lists by PathPrefix, sorted by name, paged by Marker and MaxItems
// (1–1000, default 100); tags are left out, as IAM does.
func (e *Emulator) listInstanceProfiles(f url.Values) (any, error) {
	prefix := cmp.Or(f.Get("PathPrefix"), "/")
	size := 100
	if v := f.Get("MaxItems"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return nil, errIAMValidation("1 validation error detected: Value '%s' at 'maxItems' failed to satisfy constraint: Member must have value between 1 and 1000", v)
		}
		size = n
	}
	start := 0
	if m := f.Get("Marker"); m != "" {
		n, ok := decodeToken(m)
		if !ok {
			return nil, errIAMValidation("Invalid Marker.")
		}
		start = n
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var all []*instanceProfile
	for _, p := range e.profiles {
		if strings.HasPrefix(p.Path, prefix) {
			all = append(all, p)
		}
	}
	slices.SortFunc(all, func(a, b *instanceProfile) int { return strings.Compare(a.Name, b.Name) })
	from, to, next := page{start: start, size: size}.cut(len(all))
	out := &listProfilesResult{InstanceProfiles: []instanceProfileXML{}, IsTruncated: next != "", Marker: next}
	for _, p := range all[from:to] {
		out.InstanceProfiles = append(out.InstanceProfiles, e.profileXMLLocked(p, false))
	}
	return out, nil
}

// profileExistsLocked reports whether an instance profile, named or given by ARN, exists.
func (e *Emulator) profileExistsLocked(nameOrArn string) bool {
	_, ok := e.profiles[profileName(nameOrArn)]
	return ok
}

// profileRefLocked is the ARN and id of the instance profile a launch template names (by name
// or ARN), as DescribeInstances shows them; "" for none.
func (e *Emulator) profileRefLocked(nameOrArn string) (arn, id string) {
	p, ok := e.profiles[profileName(nameOrArn)]
	if nameOrArn == "" || !ok {
		return "", ""
	}
	return e.profileArn(p), p.ID
}

func (e *Emulator) profileArn(p *instanceProfile) string {
	return "arn:aws:iam::" + e.cfg.AccountID + ":instance-profile" + p.Path + p.Name
}

func isArn(s string) bool { return strings.HasPrefix(s, "arn:") }

// profileName is the name in an instance profile's name or ARN.
func profileName(nameOrArn string) string {
	if isArn(nameOrArn) {
		return nameOrArn[strings.LastIndexByte(nameOrArn, '/')+1:]
	}
	return nameOrArn
}

// InstanceProfileInfo is an instance profile as tests and the admin API see it.
type InstanceProfileInfo struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Role string `json:"role,omitempty"` // "" for none
	Tags []Tag  `json:"tags,omitempty"`
}

// InstanceProfiles lists the instance profiles, by name.
func (e *Emulator) InstanceProfiles() []InstanceProfileInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]InstanceProfileInfo, 0, len(e.profiles))
	for _, p := range e.profiles {
		out = append(out, InstanceProfileInfo{Name: p.Name, Path: p.Path, Role: p.Role, Tags: slices.Clone(p.Tags)})
	}
	slices.SortFunc(out, func(a, b InstanceProfileInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Roles lists the names of the IAM roles, sorted.
func (e *Emulator) Roles() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]string, 0, len(e.roles))
	for name := range e.roles {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
