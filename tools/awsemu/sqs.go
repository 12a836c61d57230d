package awsemu

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// This file answers the SQS JSON 1.0 protocol: X-Amz-Target AmazonSQS.<Operation>, JSON body,
// queue URL in the body.

const (
	defaultVisibility = 30 * time.Second
	maxLongPoll       = 20 * time.Second
	retention         = 4 * 24 * time.Hour
	pollRecheck       = 25 * time.Millisecond
	maxMessageBytes   = 256 * 1024
)

type queue struct {
	name       string
	created    time.Time
	visibility time.Duration
	delay      time.Duration
	wait       time.Duration
	attrs      map[string]string // as created, for idempotent CreateQueue
	messages   []*message
	handles    map[string]*message // every receipt handle ever issued
	notify     chan struct{}       // closed and replaced when a message may have become available
	waiting    int                 // long polls waiting now
}

type message struct {
	id, body, md5 string
	sent          time.Time
	visibleAt     time.Time
	receiveCount  int
	firstReceive  time.Time
	receipt       string // current receipt handle
	deleted       bool
}

// sqsHandler handles one operation given the raw JSON body.
type sqsHandler func(e *Emulator, ctx context.Context, host string, body []byte) (any, error)

var sqsActions map[string]sqsHandler

func init() {
	sqsActions = map[string]sqsHandler{
		"CreateQueue":             (*Emulator).sqsCreateQueue,
		"GetQueueUrl":             (*Emulator).sqsGetQueueURL,
		"SendMessage":             (*Emulator).sqsSendMessage,
		"ReceiveMessage":          (*Emulator).sqsReceiveMessage,
		"DeleteMessage":           (*Emulator).sqsDeleteMessage,
		"ChangeMessageVisibility": (*Emulator).sqsChangeVisibility,
		"GetQueueAttributes":      (*Emulator).sqsGetQueueAttributes,
		"PurgeQueue":              (*Emulator).sqsPurgeQueue,
		"ListQueues":              (*Emulator).sqsListQueues,
		"DeleteQueue":             (*Emulator).sqsDeleteQueue,
	}
}

func sqsError(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// decodeSQSJSON decodes a request body into v; it is the decoder the fuzz test drives.
func decodeSQSJSON(body []byte, v any) error {
	if len(body) > maxBodyBytes {
		return sqsError(413, "RequestEntityTooLarge", "request body exceeds %d bytes", maxBodyBytes)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		body = []byte("{}")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return sqsError(400, "SerializationException", "decoding request body: %v", err)
	}
	return nil
}

func (e *Emulator) serveSQS(w http.ResponseWriter, r *http.Request, reqID string) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		writeSQSError(w, sqsError(400, "SerializationException", "reading body: %v", err))
		return
	}
	if e.throttled("sqs", op) {
		e.record(Call{Service: "sqs", Action: op, ErrorCode: "RequestThrottled", Throttled: true})
		writeSQSError(w, sqsError(400, "RequestThrottled", "Request is throttled."))
		return
	}
	h, ok := sqsActions[op]
	if !ok {
		e.record(Call{Service: "sqs", Action: op, ErrorCode: "UnknownOperationException"})
		writeSQSError(w, sqsError(400, "UnknownOperationException", "unknown operation %q", op))
		return
	}
	out, err := h(e, r.Context(), r.Host, body)
	e.record(Call{Service: "sqs", Action: op, ErrorCode: errorCode(err)})
	if err != nil {
		writeSQSError(w, err)
		return
	}
	buf, err := json.Marshal(out)
	if err != nil {
		writeSQSError(w, sqsError(500, "InternalError", "encoding response: %v", err))
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_, _ = w.Write(buf)
}

func writeSQSError(w http.ResponseWriter, err error) {
	ae := &apiError{Status: 500, Code: "InternalError", Message: err.Error()}
	errors.As(err, &ae)
	buf, _ := json.Marshal(map[string]string{"__type": "com.amazonaws.sqs#" + ae.Code, "message": ae.Message})
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(ae.Status)
	_, _ = w.Write(buf)
}

func (e *Emulator) queueURL(host, name string) string {
	if host == "" {
		host = "localhost"
	}
	return "http://" + host + "/" + e.cfg.AccountID + "/" + name
}

// queueLocked finds the queue a URL names (its last path segment).
func (e *Emulator) queueLocked(url string) (*queue, error) {
	if url == "" {
		return nil, sqsError(400, "MissingParameter", "The request must contain the parameter QueueUrl.")
	}
	name := url[strings.LastIndexByte(url, '/')+1:]
	q, ok := e.queues[name]
	if !ok {
		return nil, sqsError(400, "QueueDoesNotExist", "The specified queue does not exist.")
	}
	return q, nil
}

func validQueueName(n string) bool {
	if n == "" || len(n) > 80 {
		return false
	}
	for _, r := range strings.TrimSuffix(n, ".fifo") {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func secondsAttr(attrs map[string]string, key string, def time.Duration, maxSec int) (time.Duration, error) {
	v, ok := attrs[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > maxSec {
		return 0, sqsError(400, "InvalidAttributeValue", "Invalid value for the parameter %s.", key)
	}
	return time.Duration(n) * time.Second, nil
}

// createQueueLocked makes a queue or returns the existing one with the same attributes.
func (e *Emulator) createQueueLocked(name string, attrs map[string]string) (*queue, error) {
	vis, err := secondsAttr(attrs, "VisibilityTimeout", defaultVisibility, 43200)
	if err != nil {
		return nil, err
	}
	delay, err := secondsAttr(attrs, "DelaySeconds", 0, 900)
	if err != nil {
		return nil, err
	}
	wait, err := secondsAttr(attrs, "ReceiveMessageWaitTimeSeconds", 0, 20)
	if err != nil {
		return nil, err
	}
	if q, ok := e.queues[name]; ok {
		for k, v := range attrs {
			if q.attrs[k] != v {
				return nil, sqsError(400, "QueueNameExists", "A queue already exists with the same name and a different value for attribute %s", k)
			}
		}
		return q, nil
	}
	q := &queue{name: name, created: e.cfg.Clock.Now(), visibility: vis, delay: delay, wait: wait,
		attrs: attrs, handles: map[string]*message{}, notify: make(chan struct{})}
	e.queues[name] = q
	return q, nil
}

func (e *Emulator) sqsCreateQueue(_ context.Context, host string, body []byte) (any, error) {
	var in struct {
		QueueName  string
		Attributes map[string]string
	}
	if err := decodeSQSJSON(body, &in); err != nil {
		return nil, err
	}
	if !validQueueName(in.QueueName) {
		return nil, sqsError(400, "InvalidParameterValue", "Queue name %q is invalid: up to 80 alphanumerics, hyphens and underscores.", in.QueueName)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.createQueueLocked(in.QueueName, in.Attributes); err != nil {
		return nil, err
	}
	return map[string]string{"QueueUrl": e.queueURL(host, in.QueueName)}, nil
}

func (e *Emulator) sqsGetQueueURL(_ context.Context, host string, body []byte) (any, error) {
	var in struct{ QueueName string }
	if err := decodeSQSJSON(body, &in); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.queues[in.QueueName]; !ok {
		return nil, sqsError(400, "QueueDoesNotExist", "The specified queue does not exist.")
	}
	return map[string]string{"QueueUrl": e.queueURL(host, in.QueueName)}, nil
}

func (e *Emulator) sqsListQueues(_ context.Context, host string, body []byte) (any, error) {
	var in struct{ QueueNamePrefix string }
	if err := decodeSQSJSON(body, &in); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	urls := []string{}
	for name := range e.queues {
		if strings.HasPrefix(name, in.QueueNamePrefix) {
			urls = append(urls, e.queueURL(host, name))
		}
	}
	return map[string][]string{"QueueUrls": urls}, nil
}

func (e *Emulator) sqsDeleteQueue(_ context.Context, _ string, body []byte) (any, error) {
	var in struct{ QueueUrl string }
	if err := decodeSQSJSON(body, &in); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	q, err := e.queueLocked(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	delete(e.queues, q.name)
	close(q.notify)
	q.notify = make(chan struct{})
	return struct{}{}, nil
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// enqueueLocked adds a message and wakes long pollers.
func (e *Emulator) enqueueLocked(q *queue, body string, delay time.Duration) *message {
	now := e.cfg.Clock.Now()
	m := &message{id: e.uuidLocked(), body: body, md5: md5Hex(body), sent: now, visibleAt: now.Add(delay)}
	q.messages = append(q.messages, m)
	close(q.notify)
	q.notify = make(chan struct{})
	return m
}

// uuidLocked returns a random version-4 UUID from the seeded generator.
func (e *Emulator) uuidLocked() string {
	a, b := e.rng.Uint64(), e.rng.Uint64()
	return fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", a>>32, a>>16&0xffff, a&0xfff, b>>48&0x3fff|0x8000, b&0xffffffffffff)
}

func (e *Emulator) sqsSendMessage(_ context.Context, _ string, body []byte) (any, error) {
	var in struct {
		QueueUrl     string
		MessageBody  string
		DelaySeconds *int
	}
	if err := decodeSQSJSON(body, &in); err != nil {
		return nil, err
	}
	if in.MessageBody == "" {
		return nil, sqsError(400, "MissingParameter", "The request must contain the parameter MessageBody.")
	}
	if len(in.MessageBody) > maxMessageBytes || !utf8.ValidString(in.MessageBody) {
		return nil, sqsError(400, "InvalidMessageContents", "message body is larger than 256 KiB or not valid UTF-8")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	q, err := e.queueLocked(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	delay := q.delay
	if in.DelaySeconds != nil {
		if *in.DelaySeconds < 0 || *in.DelaySeconds > 900 {
			return nil, sqsError(400, "InvalidParameterValue", "DelaySeconds must be between 0 and 900")
		}
		delay = time.Duration(*in.DelaySeconds) * time.Second
	}
	m := e.enqueueLocked(q, in.MessageBody, delay)
	return map[string]string{"MessageId": m.id, "MD5OfMessageBody": m.md5}, nil
}

type sqsMessageJSON struct {
	MessageId     string
	ReceiptHandle string
	MD5OfBody     string
	Body          string
	Attributes    map[string]string `json:",omitempty"`
}

func (e *Emulator) sqsReceiveMessage(ctx context.Context, _ string, body []byte) (any, error) {
	var in struct {
		QueueUrl                    string
		MaxNumberOfMessages         *int
		VisibilityTimeout           *int
		WaitTimeSeconds             *int
		AttributeNames              []string
		MessageSystemAttributeNames []string
	}
	if err := decodeSQSJSON(body, &in); err != nil {
		return nil, err
	}
	maxN := 1
	if in.MaxNumberOfMessages != nil {
		maxN = *in.MaxNumberOfMessages
		if maxN < 1 || maxN > 10 {
			return nil, sqsError(400, "InvalidParameterValue", "Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", maxN)
		}
	}
	if in.VisibilityTimeout != nil && (*in.VisibilityTimeout < 0 || *in.VisibilityTimeout > 43200) {
		return nil, sqsError(400, "InvalidParameterValue", "VisibilityTimeout must be between 0 and 43200")
	}
	if in.WaitTimeSeconds != nil && (*in.WaitTimeSeconds < 0 || *in.WaitTimeSeconds > 20) {
		return nil, sqsError(400, "InvalidParameterValue", "Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.", *in.WaitTimeSeconds)
	}
	names := append(in.AttributeNames, in.MessageSystemAttributeNames...)

	e.mu.Lock()
	q, err := e.queueLocked(in.QueueUrl)
	if err != nil {
		e.mu.Unlock()
		return nil, err
	}
	wait := q.wait
	if in.WaitTimeSeconds != nil {
		wait = time.Duration(*in.WaitTimeSeconds) * time.Second
	}
	vis := q.visibility
	if in.VisibilityTimeout != nil {
		vis = time.Duration(*in.VisibilityTimeout) * time.Second
	}
	// A long poll ends when the wait has passed on the emulator's clock or in real time,
	// whichever comes first, so a manual clock can end it and a real client never waits longer
	// than it asked.
	clockDeadline := e.cfg.Clock.Now().Add(wait)
	realDeadline := time.Now().Add(wait)
	for {
		msgs := e.receiveLocked(q, maxN, vis, names)
		if len(msgs) > 0 || !e.cfg.Clock.Now().Before(clockDeadline) || !time.Now().Before(realDeadline) {
			e.mu.Unlock()
			return map[string][]sqsMessageJSON{"Messages": msgs}, nil
		}
		notify := q.notify
		q.waiting++
		e.mu.Unlock()
		var canceled bool
		select {
		case <-ctx.Done():
			canceled = true
		case <-notify:
		case <-time.After(pollRecheck):
		}
		e.mu.Lock()
		q.waiting--
		if canceled {
			e.mu.Unlock()
			return nil, sqsError(400, "RequestCanceled", "request canceled: %v", ctx.Err())
		}
		if e.queues[q.name] != q {
			e.mu.Unlock()
			return nil, sqsError(400, "QueueDoesNotExist", "The specified queue does not exist.")
		}
	}
}

// receiveLocked hands out up to n visible messages, hiding each for vis.
func (e *Emulator) receiveLocked(q *queue, n int, vis time.Duration, names []string) []sqsMessageJSON {
	now := e.cfg.Clock.Now()
	var out []sqsMessageJSON
	kept := q.messages[:0]
	for _, m := range q.messages {
		if m.deleted || now.Sub(m.sent) > retention {
			continue
		}
		kept = append(kept, m)
		if len(out) >= n || now.Before(m.visibleAt) {
			continue
		}
		m.receiveCount++
		if m.firstReceive.IsZero() {
			m.firstReceive = now
		}
		m.visibleAt = now.Add(vis)
		m.receipt = e.uuidLocked() + "#" + m.id
		q.handles[m.receipt] = m
		out = append(out, sqsMessageJSON{MessageId: m.id, ReceiptHandle: m.receipt, MD5OfBody: m.md5, Body: m.body,
			Attributes: messageAttributes(m, names)})
	}
	clear(q.messages[len(kept):])
	q.messages = kept
	return out
}

func messageAttributes(m *message, names []string) map[string]string {
	all := map[string]string{
		"SentTimestamp":                    strconv.FormatInt(m.sent.UnixMilli(), 10),
		"ApproximateReceiveCount":          strconv.Itoa(m.receiveCount),
		"ApproximateFirstReceiveTimestamp": strconv.FormatInt(m.firstReceive.UnixMilli(), 10),
		"SenderId":                         "AIDAEMULATOR",
	}
	out := map[string]string{}
	for _, n := range names {
		if n == "All" {
			return all
		}
		if v, ok := all[n]; ok {
			out[n] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// handleLocked resolves a receipt handle: current is false for an outdated handle of a
// message received again since.
func handleLocked(q *queue, receipt string) (m *message, current bool, err error) {
	if receipt == "" {
		return nil, false, sqsError(400, "MissingParameter", "The request must contain the parameter ReceiptHandle.")
	}
	m, ok := q.handles[receipt]
	if !ok {
		return nil, false, sqsError(400, "ReceiptHandleIsInvalid", "The input receipt handle %q is not a valid receipt handle.", receipt)
	}
	return m, m.receipt == receipt && !m.deleted, nil
}

// sqsDeleteMessage deletes with the latest receipt handle; an outdated handle succeeds and
// deletes nothing, as SQS documents.
func (e *Emulator) sqsDeleteMessage(_ context.Context, _ string, body []byte) (any, error) {
	var in struct{ QueueUrl, ReceiptHandle string }
	if err := decodeSQSJSON(body, &in); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	q, err := e.queueLocked(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	m, current, err := handleLocked(q, in.ReceiptHandle)
	if err != nil {
		return nil, err
	}
	if current {
		m.deleted = true
	}
	return struct{}{}, nil
}

func (e *Emulator) sqsChangeVisibility(_ context.Context, _ string, body []byte) (any, error) {
	var in struct {
		QueueUrl, ReceiptHandle string
		VisibilityTimeout       int
	}
	if err := decodeSQSJSON(body, &in); err != nil {
		return nil, err
	}
	if in.VisibilityTimeout < 0 || in.VisibilityTimeout > 43200 {
		return nil, sqsError(400, "InvalidParameterValue", "VisibilityTimeout must be between 0 and 43200")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	q, err := e.queueLocked(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	m, current, err := handleLocked(q, in.ReceiptHandle)
	if err != nil {
		return nil, err
	}
	now := e.cfg.Clock.Now()
	if !current || !now.Before(m.visibleAt) {
		return nil, sqsError(400, "MessageNotInflight", "The message referred to is not in flight.")
	}
	m.visibleAt = now.Add(time.Duration(in.VisibilityTimeout) * time.Second)
	if in.VisibilityTimeout == 0 {
		close(q.notify)
		q.notify = make(chan struct{})
	}
	return struct{}{}, nil
}

func (e *Emulator) sqsGetQueueAttributes(_ context.Context, host string, body []byte) (any, error) {
	var in struct {
		QueueUrl       string
		AttributeNames []string
	}
	if err := decodeSQSJSON(body, &in); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	q, err := e.queueLocked(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	now := e.cfg.Clock.Now()
	var visible, inflight, delayed int
	for _, m := range q.messages {
		switch {
		case m.deleted:
		case m.receiveCount == 0 && now.Before(m.visibleAt):
			delayed++
		case now.Before(m.visibleAt):
			inflight++
		default:
			visible++
		}
	}
	all := map[string]string{
		"ApproximateNumberOfMessages":           strconv.Itoa(visible),
		"ApproximateNumberOfMessagesNotVisible": strconv.Itoa(inflight),
		"ApproximateNumberOfMessagesDelayed":    strconv.Itoa(delayed),
		"VisibilityTimeout":                     strconv.Itoa(int(q.visibility / time.Second)),
		"DelaySeconds":                          strconv.Itoa(int(q.delay / time.Second)),
		"ReceiveMessageWaitTimeSeconds":         strconv.Itoa(int(q.wait / time.Second)),
		"MessageRetentionPeriod":                strconv.Itoa(int(retention / time.Second)),
		"MaximumMessageSize":                    strconv.Itoa(maxMessageBytes),
		"CreatedTimestamp":                      strconv.FormatInt(q.created.Unix(), 10),
		"LastModifiedTimestamp":                 strconv.FormatInt(q.created.Unix(), 10),
		"QueueArn":                              "arn:aws:sqs:" + e.cfg.Region + ":" + e.cfg.AccountID + ":" + q.name,
	}
	out := map[string]string{}
	for _, n := range in.AttributeNames {
		if n == "All" {
			out = all
			break
		}
		v, ok := all[n]
		if !ok {
			return nil, sqsError(400, "InvalidAttributeName", "Unknown Attribute %s.", n)
		}
		out[n] = v
	}
	return map[string]map[string]string{"Attributes": out}, nil
}

func (e *Emulator) sqsPurgeQueue(_ context.Context, _ string, body []byte) (any, error) {
	var in struct{ QueueUrl string }
	if err := decodeSQSJSON(body, &in); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	q, err := e.queueLocked(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	q.messages = nil
	return struct{}{}, nil
}
