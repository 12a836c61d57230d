package awsemu

import (
	"container/heap"
	"context"
	"fmt"
	"log"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// maxBodyBytes bounds every request body; SQS messages are at most 256 KiB.
const maxBodyBytes = 1 << 20

// Emulator is the emulated AWS account: an http.Handler answering EC2, SQS, IAM, SSM and the
// admin API.
// Create it with New and, for timers to fire without requests, call Run.
type Emulator struct {
	cfg   Config
	world *world // static: zones, VPC, subnets, security groups, images, catalog

	reqSeq atomic.Uint64

	mu        sync.Mutex
	rng       *rand.Rand
	instances map[string]*instance
	order     []*instance // launch order, for stable paging
	fleets    map[string]*fleetRecord
	templates map[string]*launchTemplate // by id
	ltByName  map[string]string
	capRules  []CapacityRule
	// nodeOverhead is what nodes registering now reserve beyond what their type and kubelet
	// settings say (SetNodeOverhead).
	nodeOverhead corev1.ResourceList
	used         map[Pool]int
	ipNext       map[string]int // per subnet
	queues       map[string]*queue
	params       map[string]Parameter // the account's own SSM parameters (PutParameter)
	timers       timerHeap
	firing       time.Time // due time of the timer being run, zero outside timers
	calls        []Call
	throttle     throttleState
	// describeDelay is how long after it exists an instance or a tag shows in DescribeInstances
	// (consistency.go).
	describeDelay time.Duration
	roles         map[string]*iamRole         // IAM, by name (iam.go)
	profiles      map[string]*instanceProfile // IAM, by name
}

// New builds an emulator from cfg (defaults filled in) with its interruption queue created.
func New(cfg Config) (*Emulator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("creating emulator: %w", err)
	}
	e := &Emulator{cfg: cfg, world: newWorld(cfg)}
	e.resetLocked()
	return e, nil
}

// resetLocked forgets all dynamic state: instances, fleets, templates, queues, parameters put,
// faults, calls.
func (e *Emulator) resetLocked() {
	e.rng = rand.New(rand.NewPCG(uint64(e.cfg.Seed), 0x5eed))
	e.instances = map[string]*instance{}
	e.order = nil
	e.fleets = map[string]*fleetRecord{}
	e.templates = map[string]*launchTemplate{}
	e.ltByName = map[string]string{}
	e.capRules = nil
	e.nodeOverhead = nil
	e.used = map[Pool]int{}
	e.ipNext = map[string]int{}
	e.queues = map[string]*queue{}
	e.params = map[string]Parameter{}
	e.timers = nil
	e.calls = nil
	e.throttle = throttleState{}
	e.describeDelay = e.cfg.DescribeDelay
	e.createQueueLocked(e.cfg.InterruptionQueue, nil)
	e.seedIAMLocked()
}

// Config returns the configuration in effect, defaults filled in.
func (e *Emulator) Config() Config { return e.cfg }

// Run advances timers every TickInterval until ctx is done, so instances boot and Nodes
// register even when nobody calls.
func (e *Emulator) Run(ctx context.Context) {
	t := time.NewTicker(e.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.mu.Lock()
			e.advanceLocked()
			e.mu.Unlock()
		}
	}
}

// ServeHTTP dispatches by path and protocol: /_emu/ is the admin API, X-Amz-Target
// AmazonSQS.* is SQS, AmazonSSM.* is SSM, AWSPriceListService.* is the Pricing API (pricing.go),
// a request signed for the service iam is IAM, one
// signed for eks is EKS (eks.go), any other POST is EC2.
func (e *Emulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID := e.newRequestID()
	defer func() {
		if v := recover(); v != nil {
			// A backstop only: handlers return errors, they do not panic.
			log.Printf("awsemu: recovered panic in %s %s: %v", r.Method, r.URL.Path, v)
			writeEC2Error(w, reqID, &apiError{Status: 500, Code: "InternalError", Message: "internal error"})
		}
	}()
	w.Header().Set("x-amzn-RequestId", reqID)
	switch {
	case strings.HasPrefix(r.URL.Path, adminPrefix):
		e.serveAdmin(w, r)
	case strings.HasPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS."):
		e.serveSQS(w, r, reqID)
	case strings.HasPrefix(r.Header.Get("X-Amz-Target"), "AmazonSSM."):
		e.serveSSM(w, r)
	case strings.HasPrefix(r.Header.Get("X-Amz-Target"), "AWSPriceListService."):
		e.servePricing(w, r)
	case sigV4Service(r) == "iam":
		e.serveIAM(w, r, reqID)
	case sigV4Service(r) == "eks":
		e.serveEKS(w, r)
	default:
		e.serveEC2(w, r, reqID)
	}
}

func (e *Emulator) newRequestID() string {
	n := e.reqSeq.Add(1)
	return fmt.Sprintf("00000000-0000-4000-8000-%012x", n)
}

// Call is one API call as the emulator saw it, for tests and the admin API.
type Call struct {
	Time      time.Time `json:"time"`
	Service   string    `json:"service"` // ec2, sqs, ssm, iam, eks or pricing
	Action    string    `json:"action"`
	ErrorCode string    `json:"errorCode,omitempty"`
	Throttled bool      `json:"throttled,omitempty"`
}

const maxCalls = 10000

// recordLocked appends a call to the bounded call log.
func (e *Emulator) recordLocked(c Call) {
	if len(e.calls) >= maxCalls {
		e.calls = append(e.calls[:0], e.calls[len(e.calls)/2:]...)
	}
	e.calls = append(e.calls, c)
}

// record logs a call, taking the lock.
func (e *Emulator) record(c Call) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c.Time = e.cfg.Clock.Now()
	e.recordLocked(c)
}

// timer is something to do at a time: boot, shutdown, node deletion, spot termination.
type timer struct {
	at  time.Time
	seq uint64
	fn  func()
}

type timerHeap []timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].seq < h[j].seq
	}
	return h[i].at.Before(h[j].at)
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(timer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}

var timerSeq atomic.Uint64

// afterLocked schedules fn (run with the lock held) d after now or, when called from a timer,
// d after that timer was due, so chains (shutdown → terminated → node deleted) keep their
// spacing however late the clock is read.
func (e *Emulator) afterLocked(d time.Duration, fn func()) {
	base := e.cfg.Clock.Now()
	if !e.firing.IsZero() {
		base = e.firing
	}
	heap.Push(&e.timers, timer{at: base.Add(d), seq: timerSeq.Add(1), fn: fn})
}

// advanceLocked runs every timer that is due.
func (e *Emulator) advanceLocked() {
	now := e.cfg.Clock.Now()
	for len(e.timers) > 0 && !e.timers[0].at.After(now) {
		t := heap.Pop(&e.timers).(timer)
		e.firing = t.at
		t.fn()
		e.firing = time.Time{}
	}
}
