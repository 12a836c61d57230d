package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/protobuf/proto"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	"github.com/fleetwright/fleetwright/pkg/subject"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	schedulerv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/scheduler/v1"
)

// maxSimulatedPods bounds one simulate request: a solve holds the answering replica's CPU.
const maxSimulatedPods = 5000

// serveSimulate answers SimulateRequests on <prefix>.scheduler.simulate until the subscription
// is drained. Every replica answers, leader or not (queue group subject.SimulateQueue): the
// answer is a solve on the replica's current view, and nothing is created, nominated,
// published or recorded.
func (s *scheduler) serveSimulate(ctx context.Context) (*nats.Subscription, error) {
	subj := s.rt.Bus.Prefix().Of(subject.SchedulerSimulate)
	sub, err := s.rt.Bus.NATS().QueueSubscribe(subj, subject.SimulateQueue, func(m *nats.Msg) { s.answerSimulate(ctx, m) })
	if err != nil {
		return nil, fmt.Errorf("subscribing to %s: %w", subj, err)
	}
	return sub, nil
}

// answerSimulate decodes one request, solves and replies; a bad request or a failed solve is
// a reply with the Fw-Error header and no body, never silence.
func (s *scheduler) answerSimulate(ctx context.Context, m *nats.Msg) {
	ctx = propagation.TraceContext{}.Extract(ctx, bus.HeaderCarrier(m.Header))
	ctx, span := tracer.Start(ctx, "scheduler.simulate")
	defer span.End()
	reply := nats.NewMsg(m.Reply)
	req := &schedulerv1.SimulateRequest{}
	resp, err := func() (*schedulerv1.SimulateResponse, error) {
		if err := proto.Unmarshal(m.Data, req); err != nil {
			return nil, fmt.Errorf("decoding SimulateRequest: %w", err)
		}
		return s.simulate(req)
	}()
	if err == nil {
		reply.Data, err = proto.Marshal(resp)
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		reply.Data = nil
		reply.Header.Set(bus.HeaderError, strings.NewReplacer("\r", " ", "\n", " ").Replace(err.Error()))
		s.rt.Log.Info().Err(err).Msg("simulate request refused")
	} else {
		reply.Header.Set(bus.HeaderType, string(resp.ProtoReflect().Descriptor().FullName()))
		span.SetAttributes(attribute.Int("fleetwright.pods", len(req.GetPods())), attribute.Int("fleetwright.claims", len(resp.GetNodeClaims())),
			attribute.Float64("fleetwright.price_usd_per_hour", resp.GetPriceUsdPerHour()))
	}
	if m.Reply == "" {
		return // a publish without a reply subject: nobody to answer
	}
	if err := m.RespondMsg(reply); err != nil && ctx.Err() == nil {
		s.rt.Log.Warn().Err(err).Msg("answering simulate request")
	}
}

// simulate is the plan the scheduler would make for the request's pods now, on this replica's
// view of the cluster: the same read and solve as a batch, with none of the acting.
func (s *scheduler) simulate(req *schedulerv1.SimulateRequest) (*schedulerv1.SimulateResponse, error) {
	pods := req.GetPods()
	if len(pods) == 0 {
		return nil, fmt.Errorf("simulate request names no pod")
	}
	if len(pods) > maxSimulatedPods {
		return nil, fmt.Errorf("simulate request names %d pods, more than the %d one request may", len(pods), maxSimulatedPods)
	}
	refs := map[string]*commonv1.PodRef{}
	core := make([]scheduling.Pod, 0, len(pods))
	for i, p := range pods {
		if p.GetUid() == "" {
			return nil, fmt.Errorf("simulate request: pod %d (%s/%s) has no uid", i, p.GetNamespace(), p.GetName())
		}
		if _, dup := refs[p.GetUid()]; dup {
			return nil, fmt.Errorf("simulate request: uid %q given to two pods", p.GetUid())
		}
		refs[p.GetUid()] = &commonv1.PodRef{Namespace: p.GetNamespace(), Name: p.GetName(), Uid: p.GetUid()}
		core = append(core, corePod(p))
	}
	if s.catalog == nil {
		return nil, fmt.Errorf("scheduler %s has not read the instance catalog yet", s.cfg.Identity)
	}
	start := s.now()
	v, err := s.read()
	if err != nil {
		return nil, fmt.Errorf("reading cluster state: %w", err)
	}
	plan, err := scheduling.Solve(s.input(v, s.nodes(v), core))
	if err != nil {
		return nil, fmt.Errorf("solving: %w", err)
	}
	s.rt.Log.Info().Int("pods", len(core)).Int("nodeclaims", len(plan.NodeClaims)).Dur("duration", s.now().Sub(start).Round(time.Millisecond)).
		Msg("simulated a workload")
	return simulateResponse(plan, v, refs, s.unavailable.Current(), s.cfg.Identity), nil
}

// simulateResponse converts a plan into the reply: each claim's instance types with the
// offerings its requirements allow, as its LaunchIntent would carry them.
func simulateResponse(plan scheduling.Plan, v view, refs map[string]*commonv1.PodRef, unavailable []scheduling.OfferingKey, identity string) *schedulerv1.SimulateResponse {
	resp := &schedulerv1.SimulateResponse{PriceUsdPerHour: plan.CostUSDPerHour(), AnsweredBy: identity}
	for _, c := range plan.NodeClaims {
		sc := &schedulerv1.SimulatedNodeClaim{NodePoolName: c.NodePool, PriceUsdPerHour: c.PriceUSDPerHour}
		for _, opt := range instanceTypeOptions(c.InstanceTypes, v.byName, c.Zones, c.CapacityTypes, unavailable) {
			sc.InstanceTypes = append(sc.InstanceTypes, &schedulerv1.SimulatedInstanceType{Name: opt.GetName(), Offerings: opt.GetOfferings()})
		}
		for _, uid := range c.PodUIDs {
			sc.Pods = append(sc.Pods, refs[uid])
		}
		sc.Requests = &commonv1.Resources{Quantities: map[string]int64{}}
		for name, q := range c.Requests {
			sc.Requests.Quantities[string(name)] = q
		}
		resp.NodeClaims = append(resp.NodeClaims, sc)
	}
	for _, p := range plan.Placements {
		resp.Placements = append(resp.Placements, &schedulerv1.SimulatedPlacement{Pod: refs[p.PodUID], Node: p.Node})
	}
	for _, u := range plan.Unschedulable {
		resp.Unschedulable = append(resp.Unschedulable, &schedulerv1.SimulatedUnschedulable{Pod: refs[u.PodUID], Reason: v.unschedulableReason(u.Reason)})
	}
	return resp
}
