package awsemu

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

const ec2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

// apiError is an error the caller sees as an AWS error code.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func errInvalidParameter(format string, args ...any) *apiError {
	return &apiError{Status: 400, Code: "InvalidParameterValue", Message: fmt.Sprintf(format, args...)}
}

func errNotFound(code, format string, args ...any) *apiError {
	return &apiError{Status: 400, Code: code, Message: fmt.Sprintf(format, args...)}
}

// ec2Resp is embedded in every EC2 response body to carry the request ID.
type ec2Resp struct {
	RequestID string `xml:"requestId"`
}

func (r *ec2Resp) setRequestID(id string) { r.RequestID = id }

type requestIDSetter interface{ setRequestID(string) }

// ec2Request is one decoded EC2 call.
type ec2Request struct {
	Action string
	Form   url.Values
}

type ec2Handler func(e *Emulator, req *ec2Request) (requestIDSetter, error)

// ec2Actions maps each supported Action to its handler.
var ec2Actions map[string]ec2Handler

func init() {
	ec2Actions = map[string]ec2Handler{
		"DescribeInstanceTypes":          (*Emulator).describeInstanceTypes,
		"DescribeInstanceTypeOfferings":  (*Emulator).describeInstanceTypeOfferings,
		"DescribeSpotPriceHistory":       (*Emulator).describeSpotPriceHistory,
		"DescribeAvailabilityZones":      (*Emulator).describeAvailabilityZones,
		"DescribeSubnets":                (*Emulator).describeSubnets,
		"DescribeSecurityGroups":         (*Emulator).describeSecurityGroups,
		"DescribeImages":                 (*Emulator).describeImages,
		"CreateLaunchTemplate":           (*Emulator).createLaunchTemplate,
		"DescribeLaunchTemplates":        (*Emulator).describeLaunchTemplates,
		"DescribeLaunchTemplateVersions": (*Emulator).describeLaunchTemplateVersions,
		"DeleteLaunchTemplate":           (*Emulator).deleteLaunchTemplate,
		"CreateFleet":                    (*Emulator).createFleet,
		"DescribeInstances":              (*Emulator).describeInstances,
		"TerminateInstances":             (*Emulator).terminateInstances,
		"CreateTags":                     (*Emulator).createTags,
		"DeleteTags":                     (*Emulator).deleteTags,
	}
}

// decodeEC2Form reads an EC2 query-protocol request: a form body (or URL query) with Action.
func decodeEC2Form(r *http.Request) (*ec2Request, error) {
	if r.Method != http.MethodPost && r.Method != http.MethodGet {
		return nil, &apiError{Status: 400, Code: "InvalidHttpRequest", Message: "method " + r.Method + " not allowed; use POST"}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return nil, &apiError{Status: 400, Code: "MalformedQueryString", Message: "reading body: " + err.Error()}
	}
	return parseEC2Form(r.URL.RawQuery, body)
}

// parseEC2Form decodes the query string and form body of an EC2 request. It is the decoder
// the fuzz test drives.
func parseEC2Form(rawQuery string, body []byte) (*ec2Request, error) {
	if len(body) > maxBodyBytes {
		return nil, &apiError{Status: 413, Code: "RequestEntityTooLarge", Message: fmt.Sprintf("request body exceeds %d bytes", maxBodyBytes)}
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, &apiError{Status: 400, Code: "MalformedQueryString", Message: "decoding form body: " + err.Error()}
	}
	if rawQuery != "" {
		q, err := url.ParseQuery(rawQuery)
		if err != nil {
			return nil, &apiError{Status: 400, Code: "MalformedQueryString", Message: "decoding query string: " + err.Error()}
		}
		for k, v := range q {
			form[k] = append(form[k], v...)
		}
	}
	action := form.Get("Action")
	if action == "" {
		return nil, &apiError{Status: 400, Code: "MissingAction", Message: "the request must contain the parameter Action"}
	}
	return &ec2Request{Action: action, Form: form}, nil
}

func (e *Emulator) serveEC2(w http.ResponseWriter, r *http.Request, reqID string) {
	req, err := decodeEC2Form(r)
	if err != nil {
		e.record(Call{Service: "ec2", Action: "", ErrorCode: errorCode(err)})
		writeEC2Error(w, reqID, err)
		return
	}
	if e.throttled("ec2", req.Action) {
		e.record(Call{Service: "ec2", Action: req.Action, ErrorCode: "RequestLimitExceeded", Throttled: true})
		writeEC2Error(w, reqID, &apiError{Status: 503, Code: "RequestLimitExceeded", Message: "Request limit exceeded."})
		return
	}
	h, ok := ec2Actions[req.Action]
	if !ok {
		err := &apiError{Status: 400, Code: "InvalidAction", Message: fmt.Sprintf("The action %s is not valid for this web service.", req.Action)}
		e.record(Call{Service: "ec2", Action: req.Action, ErrorCode: err.Code})
		writeEC2Error(w, reqID, err)
		return
	}
	resp, err := h(e, req)
	e.record(Call{Service: "ec2", Action: req.Action, ErrorCode: errorCode(err)})
	if err != nil {
		writeEC2Error(w, reqID, err)
		return
	}
	resp.setRequestID(reqID)
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	enc := xml.NewEncoder(&buf)
	start := xml.StartElement{
		Name: xml.Name{Local: req.Action + "Response"},
		Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: ec2Namespace}},
	}
	if err := enc.EncodeElement(resp, start); err != nil {
		log.Printf("awsemu: encoding %s response: %v", req.Action, err)
		writeEC2Error(w, reqID, &apiError{Status: 500, Code: "InternalError", Message: "encoding response"})
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	_, _ = w.Write(buf.Bytes())
}

func errorCode(err error) string {
	if err == nil {
		return ""
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return "InternalError"
}

type ec2ErrorXML struct {
	XMLName   xml.Name `xml:"Response"`
	Code      string   `xml:"Errors>Error>Code"`
	Message   string   `xml:"Errors>Error>Message"`
	RequestID string   `xml:"RequestID"`
}

func writeEC2Error(w http.ResponseWriter, reqID string, err error) {
	ae := &apiError{Status: 500, Code: "InternalError", Message: err.Error()}
	errors.As(err, &ae)
	out, mErr := xml.Marshal(ec2ErrorXML{Code: ae.Code, Message: ae.Message, RequestID: reqID})
	if mErr != nil {
		out = []byte("<Response><Errors><Error><Code>InternalError</Code></Error></Errors></Response>")
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(ae.Status)
	_, _ = w.Write(append([]byte(xml.Header), out...))
}

// indices returns, sorted, the N of every key "prefix.N" or "prefix.N.<rest>" in form.
func indices(form url.Values, prefix string) []int {
	seen := map[int]bool{}
	p := prefix + "."
	for k := range form {
		if !strings.HasPrefix(k, p) {
			continue
		}
		rest := k[len(p):]
		if i := strings.IndexByte(rest, '.'); i >= 0 {
			rest = rest[:i]
		}
		n, err := strconv.Atoi(rest)
		if err != nil || n < 1 {
			continue
		}
		seen[n] = true
	}
	out := make([]int, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// list returns the values of prefix.1, prefix.2, ... in index order.
func list(form url.Values, prefix string) []string {
	var out []string
	for _, n := range indices(form, prefix) {
		if v := form.Get(fmt.Sprintf("%s.%d", prefix, n)); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// filter is one EC2 Filter.N with its values.
type filter struct {
	Name   string
	Values []string
}

func parseFilters(form url.Values) []filter {
	var out []filter
	for _, n := range indices(form, "Filter") {
		p := fmt.Sprintf("Filter.%d", n)
		out = append(out, filter{Name: form.Get(p + ".Name"), Values: list(form, p+".Value")})
	}
	return out
}

// tags reads Tag.N.Key / Tag.N.Value under prefix.
func parseTags(form url.Values, prefix string) []Tag {
	var out []Tag
	for _, n := range indices(form, prefix) {
		p := fmt.Sprintf("%s.%d", prefix, n)
		if k := form.Get(p + ".Key"); k != "" {
			out = append(out, Tag{Key: k, Value: form.Get(p + ".Value")})
		}
	}
	return out
}

// tagSpecs reads TagSpecification.N.{ResourceType,Tag.M} under prefix, keeping those of the
// given resource type.
func parseTagSpecs(form url.Values, prefix, resourceType string) []Tag {
	var out []Tag
	for _, n := range indices(form, prefix) {
		p := fmt.Sprintf("%s.%d", prefix, n)
		if form.Get(p+".ResourceType") == resourceType {
			out = append(out, parseTags(form, p+".Tag")...)
		}
	}
	return out
}

// matchesAny reports whether v matches one of the patterns (EC2 filter wildcards * and ?).
func matchesAny(v string, patterns []string) bool {
	for _, p := range patterns {
		if wildcard(p, v) {
			return true
		}
	}
	return false
}

// wildcard matches s against pattern where * is any run and ? any one character.
func wildcard(pattern, s string) bool {
	px, sx := 0, 0
	starP, starS := -1, 0
	for sx < len(s) {
		switch {
		case px < len(pattern) && (pattern[px] == '?' || pattern[px] == s[sx]):
			px++
			sx++
		case px < len(pattern) && pattern[px] == '*':
			starP, starS = px, sx
			px++
		case starP >= 0:
			px = starP + 1
			starS++
			sx = starS
		default:
			return false
		}
	}
	for px < len(pattern) && pattern[px] == '*' {
		px++
	}
	return px == len(pattern)
}

// tagFilter applies the tag:<key> and tag-key filters; ok is false if f is neither.
func tagFilter(f filter, tags []Tag) (match, ok bool) {
	switch {
	case strings.HasPrefix(f.Name, "tag:"):
		key := strings.TrimPrefix(f.Name, "tag:")
		for _, t := range tags {
			if t.Key == key && matchesAny(t.Value, f.Values) {
				return true, true
			}
		}
		return false, true
	case f.Name == "tag-key":
		for _, t := range tags {
			if matchesAny(t.Key, f.Values) {
				return true, true
			}
		}
		return false, true
	case f.Name == "tag-value":
		for _, t := range tags {
			if matchesAny(t.Value, f.Values) {
				return true, true
			}
		}
		return false, true
	}
	return false, false
}

// fieldFilters maps filter names to a function giving the resource's values for it.
type fieldFilters[T any] map[string]func(T) []string

// matchFilters reports whether x passes every filter; an unknown filter name is an error.
func matchFilters[T any](x T, fs []filter, fields fieldFilters[T], tags func(T) []Tag) (bool, error) {
	for _, f := range fs {
		if tags != nil {
			if m, ok := tagFilter(f, tags(x)); ok {
				if !m {
					return false, nil
				}
				continue
			}
		}
		get, ok := fields[f.Name]
		if !ok {
			return false, errInvalidParameter("The filter '%s' is invalid", f.Name)
		}
		hit := false
		for _, v := range get(x) {
			if matchesAny(v, f.Values) {
				hit = true
				break
			}
		}
		if !hit {
			return false, nil
		}
	}
	return true, nil
}

// validateFilters checks filter names before any lock is taken, so bad input fails fast.
func validateFilters[T any](fs []filter, fields fieldFilters[T], tagged bool) error {
	for _, f := range fs {
		if tagged && (strings.HasPrefix(f.Name, "tag:") || f.Name == "tag-key" || f.Name == "tag-value") {
			continue
		}
		if _, ok := fields[f.Name]; !ok {
			return errInvalidParameter("The filter '%s' is invalid", f.Name)
		}
	}
	return nil
}

// page is a validated MaxResults/NextToken pair.
type page struct {
	start, size int // size 0 means everything
}

// parsePage validates MaxResults (min..max) and NextToken. def is the page size when
// MaxResults is absent (0: no paging).
func parsePage(form url.Values, minSize, maxSize, def int) (page, error) {
	p := page{size: def}
	if v := form.Get("MaxResults"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < minSize || n > maxSize {
			return p, errInvalidParameter("Value ( %s ) for parameter maxResults is invalid. Expecting a value between %d and %d.", v, minSize, maxSize)
		}
		p.size = n
	}
	if tok := form.Get("NextToken"); tok != "" {
		n, ok := decodeToken(tok)
		if !ok {
			return p, &apiError{Status: 400, Code: "InvalidNextToken", Message: "The token '" + tok + "' is invalid."}
		}
		p.start = n
	}
	return p, nil
}

// cut returns the [start, end) bounds of this page in a list of n items and the next token.
func (p page) cut(n int) (from, to int, next string) {
	from = min(p.start, n)
	to = n
	if p.size > 0 && from+p.size < n {
		to = from + p.size
		next = encodeToken(to)
	}
	return from, to, next
}

func encodeToken(n int) string { return "tok-" + strconv.Itoa(n) }

func decodeToken(s string) (int, bool) {
	rest, ok := strings.CutPrefix(s, "tok-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0
}
