package service

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// kubeRequests counts the service's Kubernetes API requests by verb and resource, as the
// API server's audit log would name them: what a scale run (tools/scale) reports per service,
// and what an SRE watches when the API server is under load.
type kubeRequests struct {
	next  http.RoundTripper
	count *prometheus.CounterVec
}

func newKubeRequests(reg prometheus.Registerer) (func(http.RoundTripper) http.RoundTripper, error) {
	count := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleetwright_kube_requests_total",
		Help: "Kubernetes API requests made, by verb (get, list, watch, create, update, patch, delete), resource (with its subresource, e.g. pods/eviction) and HTTP code (error: no answer).",
	}, []string{"verb", "resource", "code"})
	if err := reg.Register(count); err != nil {
		return nil, err
	}
	return func(next http.RoundTripper) http.RoundTripper { return &kubeRequests{next: next, count: count} }, nil
}

func (k *kubeRequests) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := k.next.RoundTrip(r)
	code := "error"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	verb, resource := kubeVerb(r.Method, r.URL.Path, r.URL.Query().Get("watch"))
	k.count.WithLabelValues(verb, resource, code).Inc()
	return resp, err
}

// kubeVerb names a request as the API server does: a GET of a collection is a list (a watch
// with ?watch=true or under /watch/), of one object a get. The resource is the path's resource
// and subresource ("pods/status"), "" for discovery and other non-resource paths.
func kubeVerb(method, path, watch string) (verb, resource string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// /api/v1/... or /apis/<group>/<version>/...
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return strings.ToLower(method), ""
	}
	watching := watch == "true" || watch == "1"
	if len(parts) > 0 && parts[0] == "watch" {
		watching, parts = true, parts[1:]
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) != 2 {
		parts = parts[2:] // a namespaced resource; /namespaces/<name> itself is a namespace
	}
	if len(parts) == 0 {
		return strings.ToLower(method), ""
	}
	resource = parts[0]
	named := len(parts) >= 2
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	switch method {
	case http.MethodGet:
		switch {
		case watching:
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(method)
	}
	return verb, resource
}
