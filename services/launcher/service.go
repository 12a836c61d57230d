package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/catalogkv"
	"github.com/fleetwright/fleetwright/pkg/clock"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/karpmetrics"
	"github.com/fleetwright/fleetwright/pkg/offerings"
	"github.com/fleetwright/fleetwright/pkg/sdkhttp"
	"github.com/fleetwright/fleetwright/pkg/service"
	"github.com/fleetwright/fleetwright/pkg/subject"
)

// serve wires the AWS clients, the caches and the catalog to rt and launches until ctx ends.
func serve(ctx context.Context, cfg config, rt *service.Runtime) error {
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(cfg.Region))
	if err != nil {
		return fmt.Errorf("loading AWS configuration: %w", err)
	}
	// Wrapped once configured: the configuration sets up the SDK's own client (a custom CA
	// bundle needs it unwrapped), sdkhttp only guards its request bodies.
	awsCfg.HTTPClient = sdkhttp.Client(awsCfg.HTTPClient)
	api := ec2.NewFromConfig(awsCfg)
	iamAPI := iam.NewFromConfig(awsCfg)
	// SSM answers AMI aliases and ssmParameter terms; its endpoint, like EC2's, comes from the
	// SDK's configuration (AWS_ENDPOINT_URL_SSM for the emulator).
	ssmAPI := ssm.NewFromConfig(awsCfg)
	var source string
	if cfg.ClusterCIDR, source, err = resolveClusterCIDR(ctx, eks.NewFromConfig(awsCfg), cfg); err != nil {
		return err
	}
	rt.Log.Info().Str("cluster_cidr", cfg.ClusterCIDR).Str("from", source).Msg("the cluster's service CIDR")
	version, err := rt.Kube.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("reading the cluster's Kubernetes version: %w", err)
	}
	ca := rt.RESTConfig.CAData
	if cfg.ClusterCAFile != "" {
		if ca, err = os.ReadFile(cfg.ClusterCAFile); err != nil {
			return fmt.Errorf("reading --cluster-ca-file: %w", err)
		}
	} else if len(ca) == 0 && rt.RESTConfig.CAFile != "" {
		ca, _ = os.ReadFile(rt.RESTConfig.CAFile)
	}
	if cfg.ClusterEndpoint == "" {
		cfg.ClusterEndpoint = rt.RESTConfig.Host
	}
	stores, err := newKubeStores(ctx, rt, cfg.DefaultInstanceProfile)
	if err != nil {
		return err
	}
	l := &launcher{
		cfg: cfg, api: api, claims: stores.claims, classes: stores.classes,
		resolver: newResolver(api, ssmAPI, cfg.ResolverTTL, time.Now), templates: newTemplates(api, cfg.ResolverTTL, time.Now),
		profiles:    newInstanceProfiles(iamAPI, cfg.ClusterName, cfg.Region, cfg.ResolverTTL, time.Now),
		unavailable: offerings.NewUnavailable(time.Now), bus: rt.Bus, prefix: rt.Bus.Prefix(),
		k8sMinor: fmt.Sprintf("%s.%s", version.Major, trimPlus(version.Minor)), clusterCA: ca,
		log: rt.Log, metrics: newMetrics(rt.Registry), now: time.Now, events: rt.Events,
	}
	kv, err := rt.Bus.JetStream().KeyValue(ctx, rt.Bus.Prefix().CatalogBucket())
	if err != nil {
		return fmt.Errorf("opening catalog bucket: %w", err)
	}
	if l.types, err = catalogkv.Watch(ctx, kv); err != nil {
		return err
	}
	l.unavailable.CheckWith(offerings.InCatalog(l.types))
	// The Pricing API has endpoints in few regions (AWS_ENDPOINT_URL_PRICING points it
	// elsewhere, at the emulator say).
	pricingCfg := awsCfg.Copy()
	pricingCfg.Region = pricingAPIRegion(cfg.Region)
	cat := catalogBuilder{api: api, region: cfg.Region, spotModelled: cfg.SpotPriceModelled, now: time.Now,
		onDemand: &onDemandPrices{api: pricing.NewFromConfig(pricingCfg), region: cfg.Region, every: cfg.OnDemandPriceRefresh, now: time.Now}}

	// Offerings any replica found out of capacity, replayed from one TTL back so a restart
	// still avoids them.
	if err := l.unavailable.Follow(ctx, rt.Bus, cfg.UnavailableTTL, rt.Log); err != nil {
		return err
	}
	rt.Log.Info().Str("cluster", cfg.ClusterName).Str("kubernetes", l.k8sMinor).Int("workers", cfg.Workers).Msg("launching nodeclaims")
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		// Refreshed every --catalog-refresh; a refresh that fails is tried again soon (2 s,
		// doubling to a minute), not at the next refresh: until a first catalog is out, no
		// launch can happen.
		retry := catalogRetry
		for {
			wait := cfg.CatalogRefresh
			if l.publishCatalog(gctx, cat, rt.Bus) {
				retry = catalogRetry
			} else {
				wait, retry = min(retry, cfg.CatalogRefresh), min(2*retry, time.Minute)
			}
			if !clock.Sleep(gctx, wait) {
				return nil
			}
		}
	})
	// Registration runs when a Node or NodeClaim changes (a node appears, becomes Ready, loses
	// a startup taint; a claim is launched), coalesced, and every --registration-resync besides.
	// Its own writes cause at most one more pass, which finds nothing to do and writes nothing.
	// Its gap is short: a new node's pods wait for it to lift the unregistered taint.
	reg := &registrar{launcher: l, nodes: stores.nodes}
	if err := l.changeDriven(gctx, g, stores.cache, passSpec{what: "registering nodes", controller: karpmetrics.ControllerNodeClaimLifecycle, run: reg.reconcile,
		resync: cfg.RegistrationResync, gap: registrationGap}, stores.cache.Nodes, stores.cache.NodeClaims); err != nil {
		return err
	}
	// The passes below read the whole cluster: each runs when something it reads changes, at
	// most once a service.KickGap, and every --status-interval for what no watch announces (EC2
	// resolving a class's terms to other subnets or AMIs, catalog prices in the fleet gauges).
	legacy := &legacyNodes{launcher: l, cache: stores.cache, claims: stores.dyn.Resource(clusterstate.NodeClaims), nodes: stores.nodes, warned: map[string]string{}}
	if err := l.changeDriven(gctx, g, stores.cache, passSpec{what: "adopting nodes launched by Karpenter v1alpha5", controller: karpmetrics.ControllerNodeClaimLifecycle, run: legacy.pass,
		resync: cfg.StatusInterval, gap: service.KickGap},
		withLegacy(stores.cache, stores.cache.Nodes, stores.cache.NodeClaims, stores.cache.NodePools)...); err != nil {
		return err
	}
	st := &statuses{l: l, cache: stores.cache, classes: stores.dyn.Resource(clusterstate.NodeClasses), pools: stores.dyn.Resource(clusterstate.NodePools)}
	if err := l.changeDriven(gctx, g, stores.cache, passSpec{what: "updating node class and pool statuses", controller: karpmetrics.ControllerNodeClaimStatus, run: st.pass,
		resync: cfg.StatusInterval, gap: service.KickGap},
		stores.cache.NodeClasses, stores.cache.NodePools, stores.cache.NodeClaims); err != nil {
		return err
	}
	dr := &drifts{launcher: l, cache: stores.cache, store: stores.claims, legacy: stores.classes.legacy}
	if err := l.changeDriven(gctx, g, stores.cache, passSpec{what: "recording drifted nodeclaims", controller: karpmetrics.ControllerNodeClaimDisruption, run: dr.pass,
		resync: cfg.StatusInterval, gap: service.KickGap},
		withLegacy(stores.cache, stores.cache.NodeClaims, stores.cache.NodePools, stores.cache.NodeClasses)...); err != nil {
		return err
	}
	g.Go(func() error {
		return service.Every(gctx, cfg.TemplateGC, func() {
			classes := st.classNames()
			n, err := l.templates.collect(gctx, cfg.ClusterName, classes, func() map[string]bool { return templatesInUse(stores.cache) }, cfg.TemplateGC)
			logErr(l, err, "deleting launch templates no longer used")
			if n > 0 {
				rt.Log.Info().Int("deleted", n).Msg("deleted launch templates no longer used (their node class deleted, or their configuration replaced)")
			}
			n, err = l.profiles.collect(gctx, classes)
			logErr(l, err, "deleting instance profiles of deleted node classes")
			if n > 0 {
				rt.Log.Info().Int("deleted", n).Msg("deleted instance profiles of deleted node classes")
			}
		})
	})
	g.Go(func() error {
		// Launching needs the instance facts of the published catalog: there at once when the
		// bucket holds one, after the first refresh on a first start.
		if err := l.types.Wait(gctx, rt.Log); err != nil {
			return nil
		}
		for i := 0; i < cfg.Workers; i++ {
			g.Go(func() error {
				return bus.Consume(gctx, rt.Bus, bus.ConsumerSpec{
					Durable: "launcher", Subject: rt.Bus.Prefix().Of(subject.LaunchIntents),
					MaxDeliver: 5, Batch: 1,
				}, l.handleMeasured)
			})
		}
		return nil
	})
	return g.Wait()
}

// templatesInUse are the launch templates the live claims' launch records name.
func templatesInUse(c *clusterstate.Cache) map[string]bool {
	used := map[string]bool{}
	for _, nc := range c.Claims() {
		for _, name := range recordOf(nc.Annotations).Templates {
			used[name] = true
		}
	}
	return used
}

// registrationGap is the least time between registration passes a change starts.
const registrationGap = 250 * time.Millisecond

// passRetry is how soon a pass that failed runs again, whatever its resync: a write refused
// for a moment is not left for the next change or the next --status-interval.
const passRetry = 5 * time.Second

// passSpec is one of the launcher's change-driven passes.
type passSpec struct {
	what       string // for the log line of a pass that failed: "recording drifted nodeclaims"
	controller string // Karpenter's name for the controller doing this job (controller_runtime_reconcile_*)
	run        func(context.Context) error
	resync     time.Duration
	gap        time.Duration
}

// changeDriven runs a pass in g (service.EveryOrKicked) on every change the informers deliver
// (the cache's own: what the pass reads), every resync, and passRetry after a pass that failed.
func (l *launcher) changeDriven(ctx context.Context, g *errgroup.Group, c *clusterstate.Cache, p passSpec, informers ...cache.SharedIndexInformer) error {
	kick := service.NewTrigger(p.gap)
	if err := c.OnChange(kick.Kick, informers...); err != nil {
		return fmt.Errorf("%s: %w", p.what, err)
	}
	g.Go(func() error {
		return service.EveryOrKicked(ctx, p.resync, kick, func() {
			start := time.Now()
			err := p.run(ctx)
			l.metrics.karp.reconciles.Observe(p.controller, start, err)
			logErr(l, err, p.what)
			retry := time.Time{} // none
			if err != nil {
				retry = time.Now().Add(passRetry)
			}
			kick.KickAt(retry)
		})
	})
	return nil
}

// withLegacy adds the v1alpha5 informers a pass reads (Provisioners through Pools,
// AWSNodeTemplates through NodeClass) where that API is served and so watched.
func withLegacy(c *clusterstate.Cache, informers ...cache.SharedIndexInformer) []cache.SharedIndexInformer {
	for _, inf := range []cache.SharedIndexInformer{c.Provisioners, c.Templates} {
		if inf != nil {
			informers = append(informers, inf)
		}
	}
	return informers
}

// catalogRetry is the first wait before a failed catalog refresh is tried again.
const catalogRetry = 2 * time.Second

// publishCatalog builds the catalog from EC2 and writes what changed to the KV bucket; it
// reports whether that worked.
func (l *launcher) publishCatalog(ctx context.Context, b catalogBuilder, conn *bus.Conn) bool {
	start := time.Now()
	cat, report, err := b.build(ctx)
	if err == nil {
		l.reportPrices(report)
		bucket, kerr := conn.JetStream().KeyValue(ctx, conn.Prefix().CatalogBucket())
		if kerr != nil {
			err = fmt.Errorf("opening catalog bucket: %w", kerr)
		} else {
			var changed int
			changed, err = catalogkv.Publish(ctx, bucket, cat)
			if err == nil {
				l.metrics.catalog.WithLabelValues("published").Inc()
				l.log.Info().Int("types", len(cat.InstanceTypes)).Int("changed", changed).Dur("took", time.Since(start)).Str("source", cat.Source).Msg("published instance catalog")
				return true
			}
		}
	}
	l.metrics.catalog.WithLabelValues("error").Inc()
	l.log.Error().Err(err).Msg("refreshing instance catalog failed; will retry")
	return false
}

// unpricedNamed is how many of the types left out a log line names.
const unpricedNamed = 10

// reportPrices tells where a refresh's on-demand prices came from and which types it left out
// for want of one: a gauge, and a log line per refresh that counts them and names some.
func (l *launcher) reportPrices(r priceReport) {
	l.metrics.unpriced.Set(float64(len(r.unpriced)))
	l.metrics.priced.WithLabelValues("pricing-api").Set(float64(r.api))
	l.metrics.priced.WithLabelValues("embedded").Set(float64(r.embedded))
	if r.apiErr != nil {
		l.log.Warn().Err(r.apiErr).Int("embedded", r.embedded).Int("pricing_api", r.api).
			Msg("the Pricing API gave no current on-demand prices; the embedded per-region table prices what it does not")
	}
	if n := len(r.unpriced); n > 0 {
		l.log.Warn().Int("count", n).Strs("types", r.unpriced[:min(n, unpricedNamed)]).
			Msgf("%d instance types left out of the catalog: no on-demand price from the Pricing API or the embedded table", n)
	}
	if n := len(r.unknown); n > 0 {
		l.log.Warn().Int("count", n).Strs("types", r.unknown[:min(n, unpricedNamed)]).
			Msgf("%d instance types left out of the catalog: not in the embedded type table (category, generation, max pods)", n)
	}
}

func logErr(l *launcher, err error, what string) {
	if err != nil && !errors.Is(err, context.Canceled) {
		l.log.Warn().Err(err).Msg(what)
	}
}

func trimPlus(s string) string {
	for i, r := range s {
		if r < '0' || r > '9' {
			return s[:i]
		}
	}
	return s
}
