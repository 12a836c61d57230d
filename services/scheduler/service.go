package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/catalogkv"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/offerings"
	"github.com/fleetwright/fleetwright/pkg/service"
	"github.com/fleetwright/fleetwright/pkg/subject"
	interruptionv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/interruption/v1"
	podsv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/pods/v1"
)

// durable is the batch consumer's name, shared by every replica (only the leader pulls).
const durable = "scheduler"

// scheduler wires the informers, the catalog, unavailable offerings and the API clients
// around the scheduling core.
type scheduler struct {
	cfg         config
	rt          *service.Runtime
	metrics     *metrics
	cluster     *clusterstate.Cache
	catalog     *instanceTypes
	unavailable *offerings.Unavailable
	recent      *recent
	lease       *leaseHold // this replica's hold on the Lease, which fences its writes
	recorder    record.EventRecorder
	// nominatedEvents records the per-pod Nominated events, within their budget.
	nominatedEvents *nominatedEvents
	claims          dynamic.NamespaceableResourceInterface
	now             func() time.Time
	podEvents       *lastPodEvents
	attempts        *kubeAttempts // kube-scheduler's refusals of pods, for the nomination check
	// checkNominations starts the nomination check on a change of what it reads.
	checkNominations *service.Trigger
	pending          *pendingCommand // the leader's disruption command waiting to be validated again
	onceMu           sync.Mutex
	seen             map[string]time.Time // what was logged and told once (see once)
}

// serve builds the scheduler on rt (informers, catalog, lease) and runs it until ctx ends.
func serve(ctx context.Context, cfg config, rt *service.Runtime) error {
	dyn, err := dynamic.NewForConfig(rt.RESTConfig)
	if err != nil {
		return fmt.Errorf("creating dynamic client: %w", err)
	}
	cl, err := clusterstate.New(rt.Kube, dyn, clusterstate.Want{Pods: clusterstate.AllPods, Nodes: true, DaemonSets: true, Volumes: true,
		NodeClaims: true, Pools: true, NodeClasses: true, PDBs: true}, rt.Log)
	if err != nil {
		return err
	}
	s := &scheduler{cfg: cfg, rt: rt, metrics: newMetrics(rt.Registry), cluster: cl, now: time.Now,
		claims: dyn.Resource(clusterstate.NodeClaims), recorder: rt.Events}
	s.unavailable = offerings.NewUnavailable(s.now)
	s.recent = newRecent(s.now)
	s.nominatedEvents = newNominatedEvents(s.recorder, s.recent, cfg.NominatedEventBurst, cfg.NominatedEventQPS)
	s.lease = newLeaseHold(cfg.Identity, cfg.Namespace+"/"+leaseName, cfg.RenewDeadline)
	s.podEvents = newLastPodEvents(s.now)
	if _, err := cl.Pods.AddEventHandler(s.podEvents.handler()); err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	// A NodeClaim that goes away no longer holds the pods nominated to it.
	if _, err := cl.NodeClaims.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(o any) {
		if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		if m, ok := o.(interface{ GetName() string }); ok {
			s.recent.forgetClaim(m.GetName())
		}
	}}); err != nil {
		return fmt.Errorf("watching nodeclaims: %w", err)
	}
	// The nomination check reads NodeClaims (their nominations, their nodes' readiness), nodes
	// and the pods bound to them: a change of any starts it, a burst of them once a gap.
	s.checkNominations = service.NewTrigger(min(nominationCheckGap, cfg.NominationCheck))
	if err := cl.OnChange(s.checkNominations.Kick, cl.NodeClaims, cl.Nodes, cl.Pods); err != nil {
		return err
	}
	// kube-scheduler's refusals, for the nomination check (it kicks the check once it has them).
	s.attempts = newKubeAttempts(s.now, s.checkNominations.Kick)
	if _, err := cl.Pods.AddEventHandler(s.attempts.podHandler()); err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	if _, err := cl.Nodes.AddEventHandler(s.attempts.nodeHandler()); err != nil {
		return fmt.Errorf("watching nodes: %w", err)
	}
	rt.Admin.AddReadiness("informers", cl.Ready)
	return s.run(ctx)
}

func (s *scheduler) run(ctx context.Context) error {
	if err := s.cluster.Start(ctx); err != nil {
		return err
	}
	js, prefix := s.rt.Bus.JetStream(), s.rt.Bus.Prefix()
	kv, err := js.KeyValue(ctx, prefix.CatalogBucket())
	if err != nil {
		return fmt.Errorf("opening catalog bucket: %w", err)
	}
	watch, err := catalogkv.Watch(ctx, kv)
	if err != nil {
		return err
	}
	s.catalog = &instanceTypes{watch: watch}
	s.unavailable.CheckWith(offerings.InCatalog(watch))
	sim, err := s.serveSimulate(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = sim.Drain() }()
	if err := s.unavailable.Follow(ctx, s.rt.Bus, s.cfg.UnavailableReplay, s.rt.Log); err != nil {
		return err
	}
	s.rt.Log.Info().Str("identity", s.cfg.Identity).Str("lease", s.cfg.Namespace+"/"+leaseName).Msg("caches synced; campaigning for the lease")
	return s.lead(ctx, s.schedule)
}

// schedule is the leader's work: offer the pods left waiting at once (takeover), then consume
// batches and keep intents of unlaunched claims published, until leadership (ctx) ends.
func (s *scheduler) schedule(ctx context.Context) {
	if err := s.catalog.watch.Wait(ctx, s.rt.Log); err != nil {
		return
	}
	// The leader's loops: reconcile republishes the LaunchIntent of every NodeClaim not
	// launched yet (a crash between creating a claim and publishing its intent loses nothing;
	// JetStream's dedup on the claim name makes a repeat free); endUnfulfillable ends the
	// nominations ready nodes cannot honour, when what it reads changes (nothing but a change
	// can make a node's room fall short of its nominations: time only ends nominations), and
	// every --nomination-check-interval besides; flushPodEvents keeps the claims'
	// status.lastPodEventTime; disrupt decides and carries out every disruption (disruption.go).
	var loops sync.WaitGroup
	loops.Go(func() {
		_ = service.Every(ctx, s.cfg.Reconcile, func() {
			if err := s.reconcile(ctx); err != nil && ctx.Err() == nil {
				s.rt.Log.Warn().Err(err).Msg("republishing launch intents")
			}
		})
	})
	loops.Go(func() {
		_ = service.EveryOrKicked(ctx, s.cfg.NominationCheck, s.checkNominations, func() {
			if err := s.endUnfulfillable(ctx); err != nil && ctx.Err() == nil {
				s.rt.Log.Warn().Err(err).Msg("ending nominations nodes cannot honour")
			}
		})
	})
	loops.Go(func() {
		_ = service.Every(ctx, time.Second, func() {
			if err := s.flushPodEvents(ctx); err != nil && ctx.Err() == nil {
				s.rt.Log.Warn().Err(err).Msg("recording pod events on nodeclaims")
			}
		})
	})
	loops.Go(func() {
		_ = service.Every(ctx, s.cfg.DisruptionInterval, func() {
			if err := s.disruptMeasured(ctx); err != nil && ctx.Err() == nil {
				s.rt.Log.Warn().Err(err).Msg("deciding disruptions")
			}
		})
	})
	loops.Go(func() {
		spec := bus.ConsumerSpec{Durable: interruptionsDurable, Subject: s.rt.Bus.Prefix().AllInterruptions(), MaxDeliver: 5,
			Recent: 2 * time.Minute} // a new leader does not act on a day of stored warnings
		if err := bus.Consume[*interruptionv1.InterruptionEvent](ctx, s.rt.Bus, spec, s.onInterruption); err != nil && ctx.Err() == nil {
			s.rt.Log.Error().Err(err).Msg("consuming interruption events stopped")
		}
	})
	s.takeover(ctx)
	// A batch of thousands of pods takes minutes to nominate at the client's QPS: its handler
	// gets --batch-timeout rather than the bus's default minute, kept in progress all along by
	// the bus's heartbeats. A handler that outlives this replica's lead stops at its next write
	// (fence.go) and hands the batch back.
	spec := bus.ConsumerSpec{Durable: durable, Subject: s.rt.Bus.Prefix().Of(subject.PodsPending), Batch: 1,
		HandlerTimeout: s.cfg.BatchTimeout}
	if err := bus.Consume[*podsv1.PendingPodBatch](ctx, s.rt.Bus, spec, s.handleMeasured); err != nil {
		s.rt.Log.Error().Err(err).Msg("consuming pending pod batches stopped")
	}
	loops.Wait()
}
