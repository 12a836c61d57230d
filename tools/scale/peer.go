package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	"github.com/fleetwright/fleetwright/tools/localcluster"
	"github.com/fleetwright/fleetwright/tools/proc"
)

// PeerPool is the name of the NodePool and KWOKNodeClass the peer run gives Karpenter.
const PeerPool = "peer-karpenter"

// PeerStack is a stack on which Karpenter can take Fleetwright's place for one run: the same
// control plane, kube-scheduler and kwok, with Fleetwright's services held.
type PeerStack struct {
	Kubeconfig string
	// Kubectl runs kubectl against the stack with stdin (nil: none) and returns its output.
	Kubectl func(ctx context.Context, stdin []byte, args ...string) (string, error)
	// Hold stops Fleetwright's four services and keeps them stopped; Release starts them again
	// and returns once each is ready.
	Hold, Release func(ctx context.Context) error
	// Root is the repository (deploy/crds, restored after Karpenter's run).
	Root string
	// Dir receives Karpenter's log and its instance-types file.
	Dir string
	// Region and Zones are the emulator's: Karpenter is offered the same types in the same
	// zones at the same prices.
	Region string
	Zones  []string
	// BootDelay is the emulator's boot delay, given to Karpenter as the KWOKNodeClass's
	// nodeRegistrationDelay.
	BootDelay time.Duration
	Out       io.Writer
}

// RunKarpenter runs the workload of opts with Karpenter's kwok provider in Fleetwright's place:
// it builds the pinned release if needed, holds Fleetwright's services, installs Karpenter's CRDs
// and a NodePool equivalent to the one in poolManifest (same requirements, disruption, limits)
// on a KWOKNodeClass, offers Karpenter the emulator's catalog (types, zones, prices, and each
// type's allocatable as Fleetwright plans it), runs Run, removes what Karpenter made, and
// restores Fleetwright's CRDs and services — the last also when the run fails.
func RunKarpenter(ctx context.Context, ps PeerStack, tg Target, opts Options, poolManifest []byte) (_ *Report, err error) {
	out := ps.Out
	if out == nil {
		out = io.Discard
	}
	var claims karpv1.NodeClaimList
	if err := tg.Client.List(ctx, &claims); err != nil {
		return nil, fmt.Errorf("listing nodeclaims: %w", err)
	}
	if n := len(claims.Items); n > 0 {
		return nil, fmt.Errorf("the cluster has %d NodeClaims: the peer run starts from an empty fleet (delete the pods and let the nodes go, or make down && make up)", n)
	}
	pool, err := peerPool(poolManifest, ps.BootDelay)
	if err != nil {
		return nil, err
	}
	bin, err := localcluster.EnsureKarpenterKwok(ctx, out)
	if err != nil {
		return nil, err
	}
	src, err := localcluster.KarpenterSource(ctx)
	if err != nil {
		return nil, err
	}
	types, err := karpenterInstanceTypes(ps.Region, ps.Zones)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(ps.Dir, 0o755); err != nil {
		return nil, err
	}
	typesFile := filepath.Join(ps.Dir, "karpenter-instance-types.json")
	if err := os.WriteFile(typesFile, types, 0o644); err != nil {
		return nil, err
	}
	crdsBefore, err := crdNames(ctx, ps)
	if err != nil {
		return nil, err
	}

	fmt.Fprintf(out, "peer: holding Fleetwright's services\n")
	if err := ps.Hold(ctx); err != nil {
		return nil, fmt.Errorf("holding fleetwright's services: %w", err)
	}
	defer func() {
		// Whatever happened, Fleetwright gets its cluster back.
		rctx := context.WithoutCancel(ctx)
		if rerr := restoreFleetwright(rctx, ps, crdsBefore, out); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	fmt.Fprintf(out, "peer: installing Karpenter %s's CRDs\n", localcluster.KarpenterVersion)
	if _, err := ps.Kubectl(ctx, nil, "apply", "--server-side", "--force-conflicts",
		"-f", filepath.Join(src, "kwok", "charts", "crds"), "-f", filepath.Join(src, "kwok", "apis", "crds")); err != nil {
		return nil, fmt.Errorf("installing karpenter's CRDs: %w", err)
	}
	if _, err := ps.Kubectl(ctx, nil, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/nodepools.karpenter.sh", "crd/nodeclaims.karpenter.sh", "crd/kwoknodeclasses.karpenter.kwok.sh"); err != nil {
		return nil, err
	}
	metricsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	healthPort, err := freePort()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "peer: starting Karpenter %s (kwok provider; log %s)\n", localcluster.KarpenterVersion, filepath.Join(ps.Dir, "karpenter.log"))
	k, err := proc.Start("karpenter", bin, nil, []string{
		"KUBECONFIG=" + ps.Kubeconfig,
		"SYSTEM_NAMESPACE=kube-system",
		"DISABLE_LEADER_ELECTION=true",
		"METRICS_PORT=" + strconv.Itoa(metricsPort),
		"HEALTH_PROBE_PORT=" + strconv.Itoa(healthPort),
		"INSTANCE_TYPES_FILE_PATH=" + typesFile,
		"LOG_LEVEL=info",
	}, ps.Dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = k.Stop(15 * time.Second) }()
	metricsURL := "http://127.0.0.1:" + strconv.Itoa(metricsPort)
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err = proc.WaitFor(wctx, k, "karpenter", func(ctx context.Context) error {
		return proc.HTTPOK(ctx, nil, "http://127.0.0.1:"+strconv.Itoa(healthPort)+"/readyz", "")
	})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%w (log %s)", err, k.LogPath)
	}
	if _, err := ps.Kubectl(ctx, pool, "apply", "-f", "-"); err != nil {
		return nil, fmt.Errorf("applying karpenter's pool: %w", err)
	}
	if _, err := ps.Kubectl(ctx, nil, "wait", "--for=condition=Ready", "--timeout=90s", "nodepool/"+PeerPool); err != nil {
		return nil, fmt.Errorf("karpenter's NodePool %s is not Ready: %w (log %s)", PeerPool, err, k.LogPath)
	}

	ktg := Target{Kube: tg.Kube, Client: tg.Client, Admin: map[string]string{"karpenter": metricsURL}}
	kopts := opts
	kopts.Floor, kopts.ProfileDir, kopts.Keep = false, "", false
	kopts.System = "karpenter"
	r, err := Run(ctx, ktg, kopts)
	if err != nil {
		return nil, err
	}
	if !k.Running() {
		r.Problems = append(r.Problems, fmt.Sprintf("karpenter exited during the run: %v (log %s)", k.ExitError(), k.LogPath))
	}
	// Karpenter removes its own nodes: the pool's deletion takes its claims with it.
	fmt.Fprintf(out, "peer: removing Karpenter's pool and nodes\n")
	if _, err := ps.Kubectl(ctx, nil, "delete", "nodepool", PeerPool, "--wait=false"); err != nil {
		return r, err
	}
	if err := waitNoClaims(ctx, tg.Client, 5*time.Minute); err != nil {
		return r, fmt.Errorf("%w (log %s)", err, k.LogPath)
	}
	return r, nil
}

// restoreFleetwright stops what Karpenter left, puts Fleetwright's CRDs back (and removes the
// ones only Karpenter brought), and starts Fleetwright's services again.
func restoreFleetwright(ctx context.Context, ps PeerStack, crdsBefore map[string]bool, out io.Writer) error {
	fmt.Fprintf(out, "peer: restoring Fleetwright's CRDs and services\n")
	var errs []error
	if _, err := ps.Kubectl(ctx, nil, "delete", "kwoknodeclasses.karpenter.kwok.sh", "--all", "--ignore-not-found", "--wait=false"); err != nil && !strings.Contains(err.Error(), "the server doesn't have a resource type") {
		errs = append(errs, err)
	}
	now, err := crdNames(ctx, ps)
	if err != nil {
		errs = append(errs, err)
	}
	var extra []string
	for name := range now {
		if !crdsBefore[name] {
			extra = append(extra, "crd/"+name)
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		if _, err := ps.Kubectl(ctx, nil, append([]string{"delete", "--ignore-not-found", "--wait=false"}, extra...)...); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := ps.Kubectl(ctx, nil, "apply", "--server-side", "--force-conflicts", "-k", filepath.Join(ps.Root, "deploy", "crds")); err != nil {
		errs = append(errs, fmt.Errorf("restoring fleetwright's CRDs: %w", err))
	}
	if err := ps.Release(ctx); err != nil {
		errs = append(errs, fmt.Errorf("starting fleetwright's services again: %w", err))
	}
	return errors.Join(errs...)
}

func crdNames(ctx context.Context, ps PeerStack) (map[string]bool, error) {
	list, err := ps.Kubectl(ctx, nil, "get", "crd", "-o", "name")
	if err != nil {
		return nil, fmt.Errorf("listing CRDs: %w", err)
	}
	out := map[string]bool{}
	for _, l := range strings.Fields(list) {
		out[strings.TrimPrefix(l, "customresourcedefinition.apiextensions.k8s.io/")] = true
	}
	return out, nil
}

// waitNoClaims waits until no NodeClaim is left (each one's finalizer run by its owner).
func waitNoClaims(ctx context.Context, c client.Client, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		var cl karpv1.NodeClaimList
		err := c.List(ctx, &cl)
		if err == nil && len(cl.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d NodeClaims still there after %s (err %v)", len(cl.Items), within, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// peerPool is Karpenter's NodePool made from the NodePool in manifest — its requirements,
// labels, taints, disruption and limits — on a KWOKNodeClass whose registration delay is the
// emulator's boot delay.
func peerPool(manifest []byte, bootDelay time.Duration) ([]byte, error) {
	var np *karpv1.NodePool
	for _, doc := range bytes.Split(manifest, []byte("\n---")) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("reading the pool manifest: %w", err)
		}
		if meta.Kind != "NodePool" {
			continue
		}
		if np != nil {
			return nil, errors.New("the pool manifest has more than one NodePool: the peer run gives Karpenter one")
		}
		np = &karpv1.NodePool{}
		if err := yaml.Unmarshal(doc, np); err != nil {
			return nil, fmt.Errorf("reading the pool manifest's NodePool: %w", err)
		}
	}
	if np == nil {
		return nil, errors.New("the pool manifest has no karpenter.sh/v1 NodePool")
	}
	spec := np.Spec.DeepCopy()
	spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: PeerPool}
	poolJSON, err := json.Marshal(map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
		"metadata": map[string]any{"name": PeerPool}, "spec": spec,
	})
	if err != nil {
		return nil, err
	}
	class := map[string]any{"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": map[string]any{"name": PeerPool}}
	if s := int(bootDelay.Seconds()); s > 0 {
		class["spec"] = map[string]any{"nodeRegistrationDelay": fmt.Sprintf("%ds", s)}
	}
	classJSON, err := json.Marshal(class)
	if err != nil {
		return nil, err
	}
	return append(append(classJSON, '\n'), poolJSON...), nil
}

// kwokInstanceType is one entry of Karpenter's kwok instance-types file.
type kwokInstanceType struct {
	Name             string              `json:"name"`
	Offerings        []kwokOffering      `json:"offerings"`
	Architecture     string              `json:"architecture"`
	OperatingSystems []string            `json:"operatingSystems"`
	Resources        corev1.ResourceList `json:"resources"`
}

type kwokOffering struct {
	Price        float64                          `json:"Price"`
	Available    bool                             `json:"Available"`
	Requirements []corev1.NodeSelectorRequirement `json:"Requirements"`
}

// kwokReserved is what Karpenter's kwok provider keeps of every node (its InstanceTypeOverhead).
var kwokReserved = scheduling.ResourceList{scheduling.ResourceCPU: 100, scheduling.ResourceMemory: 10 * scheduling.MiB}

// karpenterInstanceTypes is the emulator's catalog as Karpenter's kwok provider reads it: every
// Linux type priced in region, on demand and spot in each zone at the region's prices, with
// resources such that the allocatable Karpenter computes (capacity less kwokReserved) is the
// allocatable Fleetwright plans with.
func karpenterInstanceTypes(region string, zones []string) ([]byte, error) {
	if len(zones) == 0 {
		return nil, errors.New("no zones to offer karpenter")
	}
	var out []kwokInstanceType
	for _, t := range scheduling.FromCatalog(catalog.Schedulable(), nil) {
		od, ok := catalog.OnDemandPrice(region, t.Name)
		if !ok || t.Labels[scheduling.LabelOS] != "linux" {
			continue
		}
		spot, _, ok := catalog.SpotPriceRange(region, t.Name)
		if !ok {
			spot = od
		}
		kt := kwokInstanceType{Name: t.Name, Architecture: t.Labels[scheduling.LabelArch], OperatingSystems: []string{"linux"}, Resources: corev1.ResourceList{}}
		for name, v := range t.Allocatable() {
			if v <= 0 {
				continue
			}
			v += kwokReserved[name]
			switch name {
			case scheduling.ResourceCPU:
				kt.Resources[corev1.ResourceName(name)] = *resource.NewMilliQuantity(v, resource.DecimalSI)
			case scheduling.ResourceMemory, scheduling.ResourceEphemeralStorage:
				kt.Resources[corev1.ResourceName(name)] = *resource.NewQuantity(v, resource.BinarySI)
			default:
				kt.Resources[corev1.ResourceName(name)] = *resource.NewQuantity(v, resource.DecimalSI)
			}
		}
		for _, z := range zones {
			for _, o := range []struct {
				ct    string
				price float64
			}{{scheduling.CapacityTypeOnDemand, od}, {scheduling.CapacityTypeSpot, spot}} {
				kt.Offerings = append(kt.Offerings, kwokOffering{Price: o.price, Available: true, Requirements: []corev1.NodeSelectorRequirement{
					{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{o.ct}},
					{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{z}},
				}})
			}
		}
		out = append(out, kt)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no instance type is priced in %s", region)
	}
	return json.MarshalIndent(out, "", " ")
}

// emulatorZones asks the emulator's EC2 endpoint for the region's zones, as the launcher does.
func emulatorZones(ctx context.Context, endpoint, region string) ([]string, error) {
	c := ec2.New(ec2.Options{
		Region: region, BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "fleetwright-local", SecretAccessKey: "fleetwright-local"}, nil
		}),
	})
	azs, err := c.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	if err != nil {
		return nil, fmt.Errorf("describing the emulator's zones: %w", err)
	}
	var zones []string
	for _, z := range azs.AvailabilityZones {
		zones = append(zones, aws.ToString(z.ZoneName))
	}
	sort.Strings(zones)
	return zones, nil
}

// waitAdmin waits until every admin URL's /readyz answers 200 (up) or none answers at all (down).
func waitAdmin(ctx context.Context, admin map[string]string, up bool, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		var wrong []string
		for svc, base := range admin {
			ok := proc.HTTPOK(ctx, nil, base+"/readyz", "") == nil
			answers := ok || answering(base)
			if (up && !ok) || (!up && answers) {
				wrong = append(wrong, svc)
			}
		}
		if len(wrong) == 0 {
			return nil
		}
		sort.Strings(wrong)
		if time.Now().After(deadline) {
			state := "ready"
			if !up {
				state = "stopped"
			}
			return fmt.Errorf("%s not %s after %s", strings.Join(wrong, ", "), state, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// answering reports whether anything answers HTTP at base.
func answering(base string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(base + "/readyz")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return true
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// PeerLine is the comparison's last line.
func PeerLine(karpenter, fleetwright *Report) string {
	x, y := karpenter.Running.Seconds(), fleetwright.Running.Seconds()
	speedup := "n/a"
	if x > 0 && y > 0 {
		speedup = fmt.Sprintf("%.2f", x/y)
	}
	return fmt.Sprintf("peer: %d pods Running — karpenter %s s, fleetwright %s s, speed-up %s", fleetwright.Pods, secs(x), secs(y), speedup)
}

func secs(s float64) string {
	if s <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", s)
}
