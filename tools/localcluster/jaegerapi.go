package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// TraceSpan is one span of a trace as Jaeger's HTTP API returns it, its process resolved to
// the service name and its tags flattened to strings.
type TraceSpan struct {
	Service   string
	Operation string
	SpanID    string
	ParentID  string // the CHILD_OF reference, if any
	Start     time.Time
	Tags      map[string]string
}

// Trace is one trace from Jaeger, its spans in the order they started.
type Trace struct {
	ID    string
	Spans []TraceSpan
}

// Services lists the services that have spans in the trace, each once, in first-span order.
func (t Trace) Services() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range t.Spans {
		if !seen[s.Service] {
			seen[s.Service] = true
			out = append(out, s.Service)
		}
	}
	return out
}

// SpansNamed returns the trace's spans of an operation.
func (t Trace) SpansNamed(operation string) []TraceSpan {
	var out []TraceSpan
	for _, s := range t.Spans {
		if s.Operation == operation {
			out = append(out, s)
		}
	}
	return out
}

// TraceURL links a trace in Jaeger's UI.
func TraceURL(jaegerURL, traceID string) string {
	return strings.TrimRight(jaegerURL, "/") + "/trace/" + traceID
}

// JaegerTrace fetches one trace by id from Jaeger's HTTP API (GET /api/traces/<id>).
func JaegerTrace(ctx context.Context, jaegerURL, traceID string) (Trace, error) {
	traces, err := jaegerGet(ctx, strings.TrimRight(jaegerURL, "/")+"/api/traces/"+url.PathEscape(traceID))
	if err != nil {
		return Trace{}, err
	}
	if len(traces) == 0 {
		return Trace{}, fmt.Errorf("jaeger has no trace %s", traceID)
	}
	return traces[0], nil
}

// JaegerFind searches Jaeger for the recent traces holding an operation of a service (GET
// /api/traces?service=...&operation=...), at most limit of them.
func JaegerFind(ctx context.Context, jaegerURL, service, operation string, limit int) ([]Trace, error) {
	q := url.Values{"service": {service}, "limit": {strconv.Itoa(limit)}}
	if operation != "" {
		q.Set("operation", operation)
	}
	return jaegerGet(ctx, strings.TrimRight(jaegerURL, "/")+"/api/traces?"+q.Encode())
}

// apiTraces is the body of Jaeger's /api/traces answers (the UI's JSON model).
type apiTraces struct {
	Data []struct {
		TraceID string `json:"traceID"`
		Spans   []struct {
			SpanID        string `json:"spanID"`
			OperationName string `json:"operationName"`
			StartTime     int64  `json:"startTime"` // µs since the epoch
			ProcessID     string `json:"processID"`
			References    []struct {
				RefType string `json:"refType"`
				SpanID  string `json:"spanID"`
			} `json:"references"`
			Tags []struct {
				Key   string `json:"key"`
				Value any    `json:"value"`
			} `json:"tags"`
		} `json:"spans"`
		Processes map[string]struct {
			ServiceName string `json:"serviceName"`
		} `json:"processes"`
	} `json:"data"`
	Errors []struct {
		Msg string `json:"msg"`
	} `json:"errors"`
}

func jaegerGet(ctx context.Context, u string) ([]Trace, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("querying jaeger: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("querying jaeger: %w", err)
	}
	defer resp.Body.Close()
	var body apiTraces
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("decoding jaeger's answer to %s (%s): %w", u, resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := resp.Status
		if len(body.Errors) > 0 {
			msg += ": " + body.Errors[0].Msg
		}
		return nil, fmt.Errorf("querying jaeger %s: %s", u, msg)
	}
	var out []Trace
	for _, d := range body.Data {
		t := Trace{ID: d.TraceID}
		for _, s := range d.Spans {
			span := TraceSpan{Service: d.Processes[s.ProcessID].ServiceName, Operation: s.OperationName, SpanID: s.SpanID,
				Start: time.UnixMicro(s.StartTime), Tags: map[string]string{}}
			for _, r := range s.References {
				if r.RefType == "CHILD_OF" {
					span.ParentID = r.SpanID
				}
			}
			for _, tag := range s.Tags {
				span.Tags[tag.Key] = fmt.Sprint(tag.Value)
			}
			t.Spans = append(t.Spans, span)
		}
		sort.SliceStable(t.Spans, func(i, j int) bool { return t.Spans[i].Start.Before(t.Spans[j].Start) })
		out = append(out, t)
	}
	return out, nil
}
