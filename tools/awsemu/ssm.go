package awsemu

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"
)

// This file answers the SSM JSON 1.1 protocol (X-Amz-Target AmazonSSM.<Operation>) for what
// Karpenter reads from SSM: the public parameters AWS publishes for the EKS-optimized images
// the world holds (an amiSelectorTerms alias resolves through them), and parameters of the
// account put by a test (PutParameter, POST /_emu/parameters) for `ssmParameter` terms.

// Parameter is one SSM parameter as GetParameter returns it.
type Parameter struct {
	Name     string    `json:"name"`
	Value    string    `json:"value"`
	Version  int64     `json:"version,omitempty"`
	Modified time.Time `json:"modified,omitempty"`
	public   bool      // published by AWS, not the account's own
}

// publicParameters derives the parameters AWS publishes for the EKS-optimized images, by the
// paths Karpenter reads (pkg/providers/amifamily):
//
//	AL2023:       /aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/<x86_64|arm64>/<standard|nvidia|neuron>/recommended/image_id
//	              /aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/<arch>/<variant>/<image name>/image_id
//	AL2:          /aws/service/eks/optimized-ami/<k8s>/amazon-linux-2[-arm64|-gpu]/recommended/image_id
//	              /aws/service/eks/optimized-ami/<k8s>/amazon-linux-2[-arm64|-gpu]/<image name>/image_id
//	Bottlerocket: /aws/service/bottlerocket/aws-k8s-<k8s>[-nvidia]/<x86_64|arm64>/<latest|1.32.0>/image_id
//
// "recommended" and "latest" name the newest release of their path.
func publicParameters(images []image) map[string]Parameter {
	out := map[string]Parameter{}
	newest := map[string]image{} // by the path's directory
	for _, im := range images {
		if im.K8s == "" {
			continue
		}
		var dir, versioned, latest string
		switch im.Family {
		case "AL2023":
			dir = fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/%s/", im.K8s, im.Arch, im.Variant)
			versioned, latest = im.Name, "recommended"
		case "AL2":
			flavor := "amazon-linux-2"
			switch {
			case im.Variant == "gpu":
				flavor += "-gpu"
			case im.Arch == "arm64":
				flavor += "-arm64"
			}
			dir = fmt.Sprintf("/aws/service/eks/optimized-ami/%s/%s/", im.K8s, flavor)
			versioned, latest = im.Name, "recommended"
		case "Bottlerocket":
			flavor := "aws-k8s-" + im.K8s
			if im.Variant == "nvidia" {
				flavor += "-nvidia"
			}
			dir = fmt.Sprintf("/aws/service/bottlerocket/%s/%s/", flavor, im.Arch)
			versioned, latest = im.Release, "latest"
		default:
			continue
		}
		out[dir+versioned+"/image_id"] = Parameter{Name: dir + versioned + "/image_id", Value: im.ID, Version: 1, Modified: im.Created, public: true}
		if cur, ok := newest[dir+latest]; !ok || im.Created.After(cur.Created) || im.Created.Equal(cur.Created) && im.Name > cur.Name {
			newest[dir+latest] = im
		}
	}
	for prefix, im := range newest {
		name := prefix + "/image_id"
		out[name] = Parameter{Name: name, Value: im.ID, Version: 1, Modified: im.Created, public: true}
	}
	return out
}

// PutParameter creates or overwrites one of the account's String parameters, as
// `aws ssm put-parameter --overwrite` does: an overwrite raises its version.
func (e *Emulator) PutParameter(name, value string) error {
	switch {
	case name == "" || len(name) > 2048:
		return fmt.Errorf("putting parameter: name %q must be 1 to 2048 characters", name)
	case strings.HasPrefix(strings.TrimPrefix(strings.ToLower(name), "/"), "aws") || strings.HasPrefix(strings.TrimPrefix(strings.ToLower(name), "/"), "ssm"):
		return fmt.Errorf("putting parameter: name %q: parameter names beginning with aws or ssm are reserved", name)
	case strings.Count(name, "/") > 15:
		return fmt.Errorf("putting parameter: name %q has more than 15 levels", name)
	case value == "" || len(value) > 4096:
		return fmt.Errorf("putting parameter %s: value must be 1 to 4096 characters", name)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	p := Parameter{Name: name, Value: value, Version: e.params[name].Version + 1, Modified: e.cfg.Clock.Now()}
	e.params[name] = p
	return nil
}

// parameterLocked finds a parameter by name or ARN.
func (e *Emulator) parameterLocked(name string) (Parameter, bool) {
	if strings.HasPrefix(name, "arn:") {
		// arn:aws:ssm:<region>:<account>:parameter/<name without its leading slash>
		_, rest, ok := strings.Cut(name, ":parameter/")
		if !ok {
			return Parameter{}, false
		}
		if p, ok := e.parameterLocked("/" + rest); ok {
			return p, true
		}
		name = rest
	}
	if p, ok := e.world.params[name]; ok {
		return p, true
	}
	p, ok := e.params[name]
	return p, ok
}

func (e *Emulator) parameterARN(p Parameter) string {
	account := e.cfg.AccountID
	if p.public {
		account = ""
	}
	return fmt.Sprintf("arn:aws:ssm:%s:%s:parameter/%s", e.cfg.Region, account, strings.TrimPrefix(p.Name, "/"))
}

type ssmParameterJSON struct {
	Name             string  `json:"Name"`
	Type             string  `json:"Type"`
	Value            string  `json:"Value"`
	Version          int64   `json:"Version"`
	LastModifiedDate float64 `json:"LastModifiedDate"`
	ARN              string  `json:"ARN"`
	DataType         string  `json:"DataType"`
}

func (e *Emulator) parameterJSON(p Parameter) ssmParameterJSON {
	return ssmParameterJSON{Name: p.Name, Type: "String", Value: p.Value, Version: p.Version,
		LastModifiedDate: float64(p.Modified.UnixMilli()) / 1000, ARN: e.parameterARN(p), DataType: "text"}
}

func ssmError(code, format string, args ...any) *apiError {
	return &apiError{Status: 400, Code: code, Message: fmt.Sprintf(format, args...)}
}

func (e *Emulator) serveSSM(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AmazonSSM.")
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil || len(body) > maxBodyBytes {
		writeSSMError(w, ssmError("SerializationException", "reading body: request body missing or over %d bytes", maxBodyBytes))
		return
	}
	if e.throttled("ssm", op) {
		e.record(Call{Service: "ssm", Action: op, ErrorCode: "ThrottlingException", Throttled: true})
		writeSSMError(w, ssmError("ThrottlingException", "Rate exceeded"))
		return
	}
	var out any
	switch op {
	case "GetParameter":
		out, err = e.ssmGetParameter(body)
	case "GetParameters":
		out, err = e.ssmGetParameters(body)
	default:
		err = ssmError("UnknownOperationException", "unknown operation %q", op)
	}
	e.record(Call{Service: "ssm", Action: op, ErrorCode: errorCode(err)})
	if err != nil {
		writeSSMError(w, err)
		return
	}
	buf, err := json.Marshal(out)
	if err != nil {
		writeSSMError(w, &apiError{Status: 500, Code: "InternalServerError", Message: "encoding response"})
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_, _ = w.Write(buf)
}

func decodeSSM(body []byte, v any) error {
	if len(strings.TrimSpace(string(body))) == 0 {
		body = []byte("{}")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return ssmError("SerializationException", "decoding request body: %v", err)
	}
	return nil
}

func (e *Emulator) ssmGetParameter(body []byte) (any, error) {
	var in struct {
		Name           string
		WithDecryption bool
	}
	if err := decodeSSM(body, &in); err != nil {
		return nil, err
	}
	if in.Name == "" {
		return nil, ssmError("ValidationException", "1 validation error detected: Value null at 'name' failed to satisfy constraint: Member must not be null")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.parameterLocked(in.Name)
	if !ok {
		return nil, ssmError("ParameterNotFound", "Parameter %s not found.", in.Name)
	}
	return map[string]any{"Parameter": e.parameterJSON(p)}, nil
}

// maxGetParameters is how many names one GetParameters call may ask for.
const maxGetParameters = 10

func (e *Emulator) ssmGetParameters(body []byte) (any, error) {
	var in struct {
		Names          []string
		WithDecryption bool
	}
	if err := decodeSSM(body, &in); err != nil {
		return nil, err
	}
	if len(in.Names) == 0 || len(in.Names) > maxGetParameters {
		return nil, ssmError("ValidationException",
			"1 validation error detected: Value at 'names' failed to satisfy constraint: Member must have length between 1 and %d", maxGetParameters)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	found, invalid := []ssmParameterJSON{}, []string{}
	for _, name := range in.Names {
		if p, ok := e.parameterLocked(name); ok {
			found = append(found, e.parameterJSON(p))
		} else {
			invalid = append(invalid, name)
		}
	}
	sort.Slice(found, func(i, j int) bool { return found[i].Name < found[j].Name })
	return map[string]any{"Parameters": found, "InvalidParameters": invalid}, nil
}

func writeSSMError(w http.ResponseWriter, err error) {
	ae := &apiError{Status: 500, Code: "InternalServerError", Message: err.Error()}
	errors.As(err, &ae)
	buf, _ := json.Marshal(map[string]string{"__type": ae.Code, "message": ae.Message})
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(ae.Status)
	_, _ = w.Write(buf)
}
