package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/catalogkv"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/faultpoint"
	"github.com/fleetwright/fleetwright/pkg/karpmetrics"
	"github.com/fleetwright/fleetwright/pkg/offerings"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	"github.com/fleetwright/fleetwright/pkg/subject"
	"github.com/fleetwright/fleetwright/pkg/userdata"
	catalogv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/catalog/v1"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
)

// claimState is what the launcher needs to know of a NodeClaim.
type claimState struct {
	Name          string
	UID           string
	NodePool      string
	ProviderID    string
	NodeName      string
	Deleting      bool
	Registered    bool
	Initialized   bool
	Created       time.Time
	Labels        map[string]string // labels the claim asks its node to carry
	Annotations   map[string]string // and annotations (the pool template's), as Karpenter syncs them
	Taints        []corev1.Taint    // the claim's taints and startup taints, in its node's user data and put on it at registration
	StartupTaints []*commonv1.Taint
	// NodeClassRef and Requirements are what a launch is made from (the intent only names the
	// claim): the node class, and the instance types, zones and capacity types allowed.
	NodeClassRef *commonv1.ObjectRef
	Requirements []karpv1.NodeSelectorRequirementWithMinValues
	// Requests is what the claim's pods need (spec.resources.requests): the types a claim made by
	// hand may launch as must hold it (options).
	Requests corev1.ResourceList
	// Launch is the record of the last launch asked of EC2 for it (launchrecord.go).
	Launch launchRecord
	// TraceParent is the trace of the decision that created the claim (telemetry.TraceAnnotation).
	TraceParent string
}

// values are the values of the claim's In requirement on key; nil when it has none (any).
func (c claimState) values(key string) []string {
	for _, r := range c.Requirements {
		if r.Key == key && r.Operator == corev1.NodeSelectorOpIn {
			return r.Values
		}
	}
	return nil
}

// launchInfo is what a successful launch records on the NodeClaim.
type launchInfo struct {
	launched
	ProviderID     string
	ImageID        string
	LaunchTemplate string
	Type           *catalogv1.InstanceType // the launched type's facts, from the published catalog
	ZoneID         string
	// Node is what the node's capacity is computed under (its class's kubelet settings,
	// volumes and instance-store policy).
	Node scheduling.NodeSettings
	// SecurityGroups the instance was launched with (its launch template's), and the hash of
	// the node class it was launched with (EC2NodeClass.Hash), for drift detection.
	SecurityGroups []string
	ClassHash      string
	// Adopted says the instance was not launched now but found: an earlier delivery launched it
	// and did not record it.
	Adopted bool
}

func zoneIDOf(subnets []subnet, zone string) string {
	for _, s := range subnets {
		if s.Zone == zone {
			return s.ZoneID
		}
	}
	return ""
}

var errClaimNotFound = errors.New("nodeclaim not found")

// claimStore reads and records NodeClaims (Kubernetes in production and in tests).
type claimStore interface {
	Get(ctx context.Context, name string) (claimState, error)
	MarkLaunched(ctx context.Context, name string, info launchInfo) error
	// Fail records why the claim could not be launched and deletes it, so its pods are
	// offered to the scheduler again.
	Fail(ctx context.Context, name, reason, message string) error
	List(ctx context.Context) ([]claimState, error)
	// MarkRegistered and MarkInitialized report whether they changed the claim: false when the
	// API server has it so already (a pass that ran on a cache a moment behind its own write).
	MarkRegistered(ctx context.Context, name, nodeName string) (bool, error)
	MarkInitialized(ctx context.Context, name string) (bool, error)
	Delete(ctx context.Context, name string) error
	// RecordLaunch writes a delivery's launch record on the claim before CreateFleet
	// (launchrecord.go).
	RecordLaunch(ctx context.Context, name, uid string, rec launchRecord, wait time.Duration) error
}

// nodeClassSpec is a resolved view of an EC2NodeClass (or a translated AWSNodeTemplate).
type nodeClassSpec struct {
	Name            string
	AMIFamily       string
	AMIs            []amiTerm
	Subnets         []selectorTerm
	SecurityGroups  []selectorTerm
	UserData        string
	Role            string // an instance profile is made for it (instanceProfiles)
	InstanceProfile string // or this one is used as it is
	Tags            map[string]string
	// Kubelet, BlockDeviceMappings and InstanceStorePolicy ("" or RAID0) are the class's
	// settings for its nodes (see nodesettings.go).
	Kubelet             userdata.Kubelet
	BlockDeviceMappings []*ec2v1.BlockDeviceMapping
	InstanceStorePolicy string
	Metadata            metadataOptions
	PublicIP            *bool // associatePublicIPAddress; nil leaves it to the subnet
	Monitoring          bool  // detailedMonitoring
	Context             string
	Hash                string // EC2NodeClass.Hash of the class (or of the AWSNodeTemplate's translation)
	// Ready is the class's Ready condition as its status has it (nil: none yet), and Generation
	// the class's; Translated marks an AWSNodeTemplate's translation, which has no status.
	Ready      *metav1.Condition
	Generation int64
	Translated bool
}

// readiness is why a claim of the class is not launched now: errNodeClassNotReady (the claim
// is deleted, as Karpenter's) when the class says Ready=False, a passing error (the launch is
// tried again) while its readiness is unknown or not yet judged against its latest spec.
func (c nodeClassSpec) readiness() error {
	switch {
	case c.Translated:
		return nil
	case c.Ready != nil && c.Ready.Status == metav1.ConditionFalse:
		return fmt.Errorf("%w: EC2NodeClass %s is not Ready: %s", errNodeClassNotReady, c.Name, c.Ready.Message)
	case c.Ready == nil || c.Ready.Status != metav1.ConditionTrue:
		return fmt.Errorf("EC2NodeClass %s is not Ready yet (its readiness is not known)", c.Name)
	case c.Ready.ObservedGeneration != c.Generation:
		return fmt.Errorf("EC2NodeClass %s: its status is not yet judged against its latest spec (generation %d, Ready observed at %d)",
			c.Name, c.Generation, c.Ready.ObservedGeneration)
	}
	return nil
}

var (
	errNodeClassNotFound = errors.New("node class not found")
	errNodeClassInvalid  = errors.New("invalid node class")
	errNodeClassNotReady = errors.New("node class not ready")
)

type nodeClassStore interface {
	Get(ctx context.Context, ref *commonv1.ObjectRef) (nodeClassSpec, error)
	// Pool is a pool by name, for what it decides beyond its claims (a Provisioner's kubelet).
	Pool(name string) (clusterstate.Pool, bool)
}

type publisher interface {
	Publish(ctx context.Context, subj string, msg proto.Message, msgID string) error
}

// launcher carries out LaunchIntents.
type launcher struct {
	cfg         config
	api         EC2API
	claims      claimStore
	classes     nodeClassStore
	types       *catalogkv.Watcher // the catalog as published: the one source of instance facts
	events      record.EventRecorder
	resolver    *resolver
	templates   *templates
	profiles    *instanceProfiles
	unavailable *offerings.Unavailable
	bus         publisher
	prefix      subject.Prefix
	k8sMinor    string // e.g. "1.32", for AMI aliases
	clusterCA   []byte
	log         zerolog.Logger
	metrics     *metrics
	now         func() time.Time
}

// maxICERetries bounds how often one intent retries after capacity errors before its claim
// fails (each retry excludes the pools that were just reported out of capacity).
const maxICERetries = 3

// handle launches the intent's NodeClaim, once. The intent only names the claim: what is
// launched (node class, instance types, zones, capacity types, labels, taints) is read from the
// claim as the API server has it, and from its pool and class, never from the message, so a
// message (a replayed one, or one from whoever holds a service's NATS credentials) can ask for
// a claim's launch but not decide what it is. An intent that names no UID, or another claim's,
// launches nothing. A redelivered intent finds the claim launched, or the instance an earlier
// delivery launched without recording it (by its karpenter.sh/nodeclaim tag, see adopt, and
// the claim's launch record, see launchrecord.go), and launches nothing new.
func (l *launcher) handle(ctx context.Context, intent *launchv1.LaunchIntent, d bus.Delivery) error {
	ctx, span := otel.Tracer("launcher").Start(ctx, "launcher.launch")
	defer span.End()
	span.SetAttributes(attribute.String("fleetwright.nodeclaim", intent.GetNodeClaimName()), attribute.String("fleetwright.nodepool", intent.GetNodePoolName()))
	log := l.log.With().Ctx(ctx).Str("nodeclaim", intent.GetNodeClaimName()).Uint64("attempt", d.Attempt).Logger()

	if intent.GetNodeClaimUid() == "" {
		l.metrics.launches.WithLabelValues(intent.GetNodePoolName(), "refused").Inc()
		err := fmt.Errorf("launch intent for nodeclaim %q names no NodeClaim UID: refused, nothing launched (an intent must name the UID of the claim it is for)",
			intent.GetNodeClaimName())
		log.Error().Err(err).Msg("refusing launch intent")
		return bus.Permanent(err)
	}
	claim, err := l.claims.Get(ctx, intent.GetNodeClaimName())
	switch {
	case errors.Is(err, errClaimNotFound):
		log.Info().Msg("nodeclaim is gone; nothing to launch")
		return nil
	case err != nil:
		return fmt.Errorf("reading nodeclaim: %w", err)
	case claim.UID != intent.GetNodeClaimUid():
		log.Info().Str("uid", intent.GetNodeClaimUid()).Str("claimUID", claim.UID).Msg("intent is for another nodeclaim of the same name; ignored")
		return nil
	case claim.ProviderID != "":
		log.Debug().Str("providerID", claim.ProviderID).Msg("nodeclaim already launched")
		return nil
	case claim.Deleting:
		log.Info().Msg("nodeclaim is being deleted; not launching")
		return nil
	}
	log = log.With().Str("nodepool", claim.NodePool).Logger()

	info, err := l.launch(ctx, claim, log)
	if errors.Is(err, errLaunchedMeanwhile) {
		log.Info().Msg("nodeclaim recorded its instance meanwhile; nothing to launch")
		return nil
	}
	if errors.Is(err, errClaimNotFound) {
		log.Info().Msg("nodeclaim is gone; nothing to launch")
		return nil
	}
	if err != nil {
		span.RecordError(err)
		var ice *InsufficientCapacityError
		permanent := errors.As(err, &ice) || errors.Is(err, errNoOverrides) || errors.Is(err, errNodeClassNotFound) ||
			errors.Is(err, errNodeClassInvalid) || errors.Is(err, errNodeClassNotReady) || bus.IsPermanent(err)
		if (permanent || d.LastAttempt()) && !errors.Is(err, errLaunchInFlight) {
			l.fail(ctx, claim, err, int(d.Attempt), log)
			if permanent {
				return nil
			}
			return bus.Permanent(err)
		}
		l.metrics.launches.WithLabelValues(claim.NodePool, "retry").Inc()
		log.Warn().Err(err).Msg("launch failed; will retry")
		return err
	}
	span.SetAttributes(attribute.String("fleetwright.instance_id", info.InstanceID), attribute.String("fleetwright.instance_type", info.InstanceType),
		attribute.String("fleetwright.zone", info.Zone), attribute.String("fleetwright.capacity_type", info.CapacityType))
	faultpoint.Reach(faultpoint.LauncherBeforeRecord)
	if err := l.claims.MarkLaunched(ctx, claim.Name, info); err != nil {
		// The instance exists; a retry finds it by its tag (adopt) and records it.
		return fmt.Errorf("recording launch on nodeclaim: %w", err)
	}
	l.metrics.launches.WithLabelValues(claim.NodePool, "launched").Inc()
	verb := "Launched"
	if info.Adopted {
		verb = "Adopted" // launched by an earlier delivery that did not record it
	}
	l.events.Eventf(clusterstate.ClaimRef(claim.Name, claim.UID), corev1.EventTypeNormal, reasonLaunched, "%s instance %s (%s, %s, %s)",
		verb, info.InstanceID, info.InstanceType, info.Zone, info.CapacityType)
	log.Info().Bool("adopted", info.Adopted).Str("instance", info.InstanceID).Str("instanceType", info.InstanceType).Str("zone", info.Zone).
		Str("capacityType", info.CapacityType).Str("providerID", info.ProviderID).Msg("launched nodeclaim")
	l.publishResult(ctx, &launchv1.LaunchResult{
		NodeClaimName: claim.Name, NodeClaimUid: claim.UID, NodePoolName: claim.NodePool,
		Outcome: launchv1.LaunchOutcome_LAUNCH_OUTCOME_LAUNCHED, InstanceId: info.InstanceID, ProviderId: info.ProviderID,
		InstanceType: info.InstanceType, Zone: info.Zone, CapacityType: offerings.CapacityType(info.CapacityType), ImageId: info.ImageID,
		LaunchTemplateName: info.LaunchTemplate, Attempt: int32(d.Attempt), CompleteTime: timestamppb.New(l.now()),
	}, log)
	return nil
}

func (l *launcher) launch(ctx context.Context, claim claimState, log zerolog.Logger) (launchInfo, error) {
	if claim.NodeClassRef == nil {
		return launchInfo{}, bus.Permanent(fmt.Errorf("%w: nodeclaim %s has no nodeClassRef", errNodeClassNotFound, claim.Name))
	}
	class, err := l.classes.Get(ctx, claim.NodeClassRef)
	if err != nil {
		return launchInfo{}, err
	}
	if err := class.readiness(); err != nil {
		return launchInfo{}, err
	}
	subnets, err := l.resolver.subnets(ctx, class.Subnets)
	if err != nil {
		return launchInfo{}, err
	}
	options, zones, capacityTypes, err := l.options(claim, subnets)
	if err != nil {
		return launchInfo{}, err
	}
	subnets = bestPerZone(inZones(subnets, zones))
	sgs, err := l.resolver.securityGroups(ctx, class.SecurityGroups)
	if err != nil {
		return launchInfo{}, err
	}
	images, err := l.resolver.images(ctx, class.AMIs, l.k8sMinor)
	if err != nil {
		return launchInfo{}, err
	}
	profile, err := l.profiles.resolve(ctx, class)
	if errors.Is(err, errNoSuchProfile) {
		return launchInfo{}, fmt.Errorf("%w %s: %w", errNodeClassInvalid, class.Name, err)
	}
	if err != nil {
		return launchInfo{}, err
	}
	pool, _ := l.classes.Pool(claim.NodePool)
	kubelet := kubeletFor(pool, class)
	capacityType := l.chooseCapacityType(capacityTypes, options, subnets)
	// Each type launches from the image of its architecture and variant (a GPU type from the
	// nvidia image, a Neuron type from the neuron one), through one template per image.
	specs := map[imageKey]templateSpec{}
	imageOf := map[string]image{}
	var unserved []string
	for _, opt := range options {
		it, ok := l.types.Lookup(opt.GetName())
		if !ok {
			continue
		}
		img, ok := imageFor(images, it)
		if !ok {
			unserved = append(unserved, it.GetName())
			continue
		}
		if _, ok := specs[img.key()]; !ok {
			spec, err := l.templateSpec(claim, class, img, sgs, profile, capacityType, kubelet)
			if err != nil {
				return launchInfo{}, err
			}
			specs[img.key()] = spec
		}
		imageOf[it.GetName()] = img
	}
	if len(imageOf) == 0 && len(unserved) > 0 {
		// E.g. an arm64 GPU type under al2@latest, whose GPU image is x86_64 only.
		return launchInfo{}, fmt.Errorf("%w %s: no image its amiSelectorTerms resolve to serves instance types %v (architecture and GPU/accelerator variant)",
			errNodeClassInvalid, class.Name, unserved)
	}
	templates := map[imageKey]string{}
	for k, spec := range specs {
		templates[k] = spec.name()
	}
	infoOf := func(got launched) launchInfo {
		return launchInfo{
			launched:       got,
			ProviderID:     fmt.Sprintf("aws:///%s/%s", got.Zone, got.InstanceID),
			ImageID:        imageOf[got.InstanceType].ID,
			LaunchTemplate: templates[imageOf[got.InstanceType].key()],
			Type:           l.typeOf(got.InstanceType),
			ZoneID:         zoneIDOf(subnets, got.Zone),
			Node:           l.nodeSettings(kubelet, class),
			SecurityGroups: sgs,
			ClassHash:      class.Hash,
		}
	}
	// An earlier delivery may have launched the claim's instance and failed before recording
	// it (or this one's request differs from it: another unavailable set, subnet or template):
	// adopt that instance rather than launch a second one, waiting for EC2 to show it if the
	// claim records a launch a moment ago.
	nonce := newNonce()
	if info, ok, err := l.adopt(ctx, claim, infoOf); err != nil || ok {
		return info, err
	}
	var types []fleetType
	for _, opt := range options {
		if img, ok := imageOf[opt.GetName()]; ok {
			types = append(types, fleetType{Name: opt.GetName(), LaunchTemplate: templates[img.key()]})
		}
	}
	req := fleetRequest{ClaimUID: claim.UID, CapacityType: capacityType, InstanceTypes: types, Subnets: subnets, Tags: l.claimTags(claim, class),
		Context: class.Context}
	req.Unavailable = l.unavailable.Set()
	if info, ok, err := l.awaitEarlierLaunch(ctx, claim, nonce, req.token(), infoOf, log); err != nil || ok {
		return info, err
	}
	// Recorded before the templates are made, so the garbage collector, which reads the claims
	// after it lists the templates, never deletes one this launch is about to use.
	rec := launchRecord{Nonce: nonce, Templates: slices.Sorted(maps.Values(templates))}
	for try := 0; ; try++ {
		req.Unavailable = l.unavailable.Set()
		rec.At, rec.Token = l.now(), req.token()
		if err := l.claims.RecordLaunch(ctx, claim.Name, claim.UID, rec, l.cfg.LookupWait); err != nil {
			return launchInfo{}, fmt.Errorf("recording the launch on the nodeclaim: %w", err)
		}
		if err := l.ensureTemplates(ctx, specs); err != nil {
			return launchInfo{}, err
		}
		start := l.now()
		got, exhausted, err := createFleet(ctx, l.api, req)
		l.metrics.createFleet.Observe(l.now().Sub(start).Seconds())
		l.metrics.karp.cloudCall(karpmetrics.MethodCreate, l.now().Sub(start), err)
		for _, o := range exhausted {
			l.markUnavailable(ctx, o, claim.Name, log)
			l.metrics.karp.launchFailed(o, zoneIDOf(subnets, o.Zone))
		}
		if err != nil {
			l.metrics.fleetErrors.WithLabelValues(fleetErrorCode(err)).Inc()
		}
		if IsInsufficientCapacity(err) && try+1 < maxICERetries {
			// The next request leaves out the exhausted pools, so its ClientToken is new too.
			log.Info().Err(err).Msg("retrying launch without the exhausted offerings")
			continue
		}
		if apiErrorCode(err) == "InvalidLaunchTemplateName.NotFoundException" && try+1 < maxICERetries {
			// Deleted since it was made or seen (by another replica's garbage collection, which
			// read the claims before this launch recorded it): made again on the next try.
			l.templates.forget(slices.Collect(maps.Values(templates))...)
			log.Info().Err(err).Msg("retrying launch with its launch templates made again")
			continue
		}
		if apiErrorCode(err) == "IdempotentParameterMismatch" {
			// The token was used with other parameters: the claim's instance may exist.
			info, ok, aerr := l.adopt(ctx, claim, infoOf)
			switch {
			case aerr != nil:
				return launchInfo{}, aerr
			case ok:
				return info, nil
			}
			// No instance to adopt, and the same request would meet the same answer.
			return launchInfo{}, bus.Permanent(fmt.Errorf("EC2 took this launch's ClientToken for another request and no instance is tagged for nodeclaim %s: %w", claim.Name, err))
		}
		if err != nil {
			return launchInfo{}, err
		}
		faultpoint.Reach(faultpoint.LauncherAfterCreateFleet)
		return infoOf(got), nil
	}
}

// ensureTemplates makes the launch's templates EC2 does not have yet.
func (l *launcher) ensureTemplates(ctx context.Context, specs map[imageKey]templateSpec) error {
	for _, spec := range specs {
		if _, err := l.templates.ensure(ctx, spec); err != nil {
			return err
		}
	}
	return nil
}

// adopt finds the claim's instance (claimInstance) and describes it for the claim as if this
// launch had made it; ok is false when there is none.
func (l *launcher) adopt(ctx context.Context, claim claimState, infoOf func(launched) launchInfo) (launchInfo, bool, error) {
	inst, err := claimInstance(ctx, l.api, l.cfg.ClusterName, claim.Name)
	if err != nil || inst == nil {
		return launchInfo{}, false, err
	}
	info := infoOf(launchedOf(inst))
	info.Adopted = true
	// What the instance has, not what this request would have given it.
	info.ImageID = deref(inst.ImageId)
	if len(inst.SecurityGroups) > 0 {
		info.SecurityGroups = nil
		for _, g := range inst.SecurityGroups {
			info.SecurityGroups = append(info.SecurityGroups, deref(g.GroupId))
		}
	}
	if info.ZoneID == "" && inst.Placement != nil {
		info.ZoneID = deref(inst.Placement.AvailabilityZoneId)
	}
	return info, true, nil
}

// chooseCapacityType picks spot when the claim allows it and some spot offering of its types
// is available in a zone we have a subnet in, as Karpenter does; on-demand otherwise.
func (l *launcher) chooseCapacityType(capacityTypes []string, options []*launchv1.InstanceTypeOption, subnets []subnet) string {
	if !slices.Contains(capacityTypes, scheduling.CapacityTypeSpot) {
		return scheduling.CapacityTypeOnDemand
	}
	zones := map[string]bool{}
	for _, s := range subnets {
		zones[s.Zone] = true
	}
	unavailable := l.unavailable.Set()
	for _, opt := range options {
		for _, o := range opt.GetOfferings() {
			if o.GetCapacityType() == commonv1.CapacityType_CAPACITY_TYPE_SPOT && o.GetAvailable() && zones[o.GetZone()] &&
				!unavailable[Offering{InstanceType: opt.GetName(), Zone: o.GetZone(), CapacityType: scheduling.CapacityTypeSpot}] {
				return scheduling.CapacityTypeSpot
			}
		}
	}
	return scheduling.CapacityTypeOnDemand
}

func (l *launcher) templateSpec(claim claimState, class nodeClassSpec, img image, sgs []string, profile, capacityType string,
	kubelet userdata.Kubelet) (templateSpec, error) {
	// The claim's labels and taints, as registration puts them on the node (one source).
	labels := maps.Clone(claim.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	if claim.NodePool != "" { // a claim made by hand is of no pool: no label
		labels[karpv1.NodePoolLabelKey] = claim.NodePool
	}
	labels[karpv1.CapacityTypeLabelKey] = capacityType
	var taints []userdata.Taint
	for _, t := range claim.Taints {
		taints = append(taints, userdata.Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	// Karpenter v1 registers every node with this taint and lifts it once the node is linked.
	taints = append(taints, userdata.Taint{Key: unregisteredTaintKey, Effect: "NoExecute"})
	ud, err := userdata.Render(userdata.Family(class.AMIFamily), userdata.Options{
		ClusterName: l.cfg.ClusterName, ClusterEndpoint: l.cfg.ClusterEndpoint, ClusterCA: l.clusterCA,
		ClusterDNS: l.cfg.ClusterDNS, ClusterCIDR: l.cfg.ClusterCIDR, Labels: labels, Taints: taints, Custom: class.UserData,
		Kubelet: kubelet, InstanceStorePolicy: class.InstanceStorePolicy,
	})
	if err == nil {
		err = l.nodeSettings(kubelet, class).Validate()
	}
	var devs []blockDevice
	if err == nil {
		devs, err = blockDevices(class.AMIFamily, class.BlockDeviceMappings)
	}
	if err != nil {
		// An AMI family we cannot write user data for (e.g. Windows) or custom user data that is
		// not valid MIME: retrying will not help, the node class must change.
		return templateSpec{}, fmt.Errorf("%w %s: %w", errNodeClassInvalid, class.Name, err)
	}
	return templateSpec{ClusterName: l.cfg.ClusterName, NodeClass: class.Name, ImageID: img.ID, SecurityGroupIDs: sgs,
		UserData: ud, InstanceProfile: profile, Tags: l.tags(claim, class), Metadata: class.Metadata, PublicIP: class.PublicIP,
		Monitoring: class.Monitoring, BlockDevices: devs}, nil
}

const unregisteredTaintKey = "karpenter.sh/unregistered"

// tags mark every resource as this cluster's and name its pool and node class; only resources
// so tagged are ever garbage-collected or terminated. They are the launch template's: claims of
// one configuration share one template, so launches never exhaust the account's template quota.
func (l *launcher) tags(claim claimState, class nodeClassSpec) map[string]string {
	tags := map[string]string{}
	for k, v := range class.Tags {
		tags[k] = v
	}
	tags["kubernetes.io/cluster/"+l.cfg.ClusterName] = "owned"
	tags["eks:eks-cluster-name"] = l.cfg.ClusterName
	tags[karpv1.NodePoolLabelKey] = claim.NodePool
	tags[classTag] = class.Name
	return tags
}

// claimTags are tags plus the claim's own, for the fleet's instances and volumes.
func (l *launcher) claimTags(claim claimState, class nodeClassSpec) map[string]string {
	tags := l.tags(claim, class)
	tags[ec2v1.TagNodeClaim] = claim.Name
	tags["Name"] = claim.NodePool + "/" + claim.Name
	return tags
}

func (l *launcher) markUnavailable(ctx context.Context, o Offering, claim string, log zerolog.Logger) {
	now := l.now()
	l.metrics.unavailable.WithLabelValues(o.InstanceType, o.Zone, o.CapacityType).Inc()
	msg := &launchv1.OfferingUnavailable{
		InstanceType: o.InstanceType, Zone: o.Zone, CapacityType: offerings.CapacityType(o.CapacityType), Reason: "InsufficientInstanceCapacity",
		ObserveTime: timestamppb.New(now), Ttl: durationpb.New(l.cfg.UnavailableTTL), ExpireTime: timestamppb.New(now.Add(l.cfg.UnavailableTTL)),
		NodeClaimName: claim,
	}
	l.unavailable.Add(msg) // at once for this replica; the others learn it from the bus
	id := fmt.Sprintf("%s/%s/%s/%d", o.CapacityType, o.InstanceType, o.Zone, now.Unix()/10)
	if err := l.bus.Publish(ctx, l.prefix.Of(subject.OfferingsUnavailable), msg, id); err != nil {
		log.Error().Err(err).Str("offering", o.String()).Msg("publishing unavailable offering failed")
		return
	}
	log.Info().Str("offering", o.String()).Dur("for", l.cfg.UnavailableTTL).Msg("marked offering unavailable")
}

// fail records a launch that will not happen: a failed LaunchResult, and the NodeClaim
// deleted with the reason, so its pods return to the scheduler.
func (l *launcher) fail(ctx context.Context, claim claimState, cause error, attempt int, log zerolog.Logger) {
	reason := "LaunchFailed"
	switch {
	case IsInsufficientCapacity(cause) || errors.Is(cause, errNoOverrides):
		reason = "InsufficientCapacity"
	case errors.Is(cause, errNodeClassNotFound):
		reason = "NodeClassNotFound"
	case errors.Is(cause, errNodeClassInvalid):
		reason = "NodeClassInvalid"
	case errors.Is(cause, errNodeClassNotReady):
		reason = "NodeClassNotReady"
	}
	l.metrics.launches.WithLabelValues(claim.NodePool, "failed").Inc()
	l.metrics.karp.launchAbandoned(claim, reason)
	l.events.Eventf(clusterstate.ClaimRef(claim.Name, claim.UID), corev1.EventTypeWarning, failureReason(reason),
		"Launch failed, the NodeClaim is deleted so its pods are scheduled again: %v", cause)
	log.Error().Err(cause).Str("reason", reason).Msg("launching nodeclaim failed; deleting it so its pods are rescheduled")
	if err := l.claims.Fail(ctx, claim.Name, reason, cause.Error()); err != nil && !errors.Is(err, errClaimNotFound) {
		log.Error().Err(err).Msg("recording the failure on the nodeclaim failed")
	}
	l.publishResult(ctx, &launchv1.LaunchResult{
		NodeClaimName: claim.Name, NodeClaimUid: claim.UID, NodePoolName: claim.NodePool,
		Outcome: launchv1.LaunchOutcome_LAUNCH_OUTCOME_FAILED, ErrorCode: reason, ErrorMessage: cause.Error(),
		Attempt: int32(attempt), CompleteTime: timestamppb.New(l.now()),
	}, log)
}

func (l *launcher) publishResult(ctx context.Context, r *launchv1.LaunchResult, log zerolog.Logger) {
	id := fmt.Sprintf("%s/%s", r.GetNodeClaimUid(), strings.ToLower(r.GetOutcome().String()))
	if err := l.bus.Publish(ctx, l.prefix.Of(subject.LaunchResults), r, id); err != nil {
		log.Error().Err(err).Msg("publishing launch result failed")
	}
}

func inZones(subnets []subnet, zones []string) []subnet {
	if len(zones) == 0 {
		return subnets
	}
	allowed := map[string]bool{}
	for _, z := range zones {
		allowed[z] = true
	}
	var out []subnet
	for _, s := range subnets {
		if allowed[s.Zone] {
			out = append(out, s)
		}
	}
	return out
}

// typeOf is the published catalog's entry for a type the fleet launched (nil if the catalog
// has dropped it since).
func (l *launcher) typeOf(name string) *catalogv1.InstanceType {
	it, _ := l.types.Lookup(name)
	return it
}

func fleetErrorCode(err error) string {
	switch {
	case IsInsufficientCapacity(err):
		return "InsufficientInstanceCapacity"
	case errors.Is(err, errNoOverrides):
		return "NoOfferings"
	}
	if code := apiErrorCode(err); code != "" {
		return code
	}
	return "Other"
}
