package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// preflight answers, before Fleetwright's CRDs are applied, whether the API server will take
// them: it refuses a CRD whose spec.versions drops a version still listed in the existing CRD's
// status.storedVersions (objects may still be stored in it). A cluster that went through
// Karpenter v0.33–v1.0 may list v1beta1 there; Fleetwright serves v1 only. It also says what
// else the switch must take care of: conversion webhooks that stop answering when Karpenter
// stops, Helm releases that would delete the CRDs, Karpenter's admission webhooks, Machines.

// ServedVersions are the versions Fleetwright's CRDs (deploy/crds) serve, by CRD;
// TestServedVersionsAreDeployCRDs holds this table to the files.
var ServedVersions = map[string][]string{
	"nodepools.karpenter.sh":             {"v1"},
	"nodeclaims.karpenter.sh":            {"v1"},
	"ec2nodeclasses.karpenter.k8s.aws":   {"v1"},
	"provisioners.karpenter.sh":          {"v1alpha5"},
	"awsnodetemplates.karpenter.k8s.aws": {"v1alpha1"},
}

// crdCheck is what preflight found for one of Fleetwright's CRDs in the cluster.
type crdCheck struct {
	CRD            string   `json:"crd"`
	Installed      bool     `json:"installed"`
	StoredVersions []string `json:"storedVersions,omitempty"`
	StorageVersion string   `json:"storageVersion,omitempty"`
	// Unserved are the stored versions Fleetwright's CRD does not serve: applying it would be
	// refused until they are migrated away.
	Unserved []string `json:"unserved,omitempty"`
	// Webhook is the conversion webhook's service (namespace/name), when the CRD converts
	// through one.
	Webhook     string `json:"conversionWebhook,omitempty"`
	HelmRelease string `json:"helmRelease,omitempty"`
	KeepPolicy  bool   `json:"helmKeepPolicy,omitempty"`
}

// preflightReport is preflight's answer.
type preflightReport struct {
	CRDs []crdCheck `json:"crds"`
	// Webhooks are Karpenter's admission webhook configurations still installed.
	Webhooks []string `json:"admissionWebhooks,omitempty"`
	// Machines says the v1alpha5 Machine CRD (Karpenter v0.28–v0.31) exists.
	Machines bool `json:"machines,omitempty"`
	Ready    bool `json:"ready"`
}

// checkCRD judges one existing CRD against the versions Fleetwright serves for it: pure.
func checkCRD(name string, crd *apiextensionsv1.CustomResourceDefinition) crdCheck {
	c := crdCheck{CRD: name}
	if crd == nil {
		return c
	}
	c.Installed, c.StoredVersions = true, crd.Status.StoredVersions
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			c.StorageVersion = v.Name
		}
	}
	for _, v := range crd.Status.StoredVersions {
		if !slices.Contains(ServedVersions[name], v) {
			c.Unserved = append(c.Unserved, v)
		}
	}
	if conv := crd.Spec.Conversion; conv != nil && conv.Strategy == apiextensionsv1.WebhookConverter && conv.Webhook != nil &&
		conv.Webhook.ClientConfig != nil && conv.Webhook.ClientConfig.Service != nil {
		c.Webhook = conv.Webhook.ClientConfig.Service.Namespace + "/" + conv.Webhook.ClientConfig.Service.Name
	}
	c.HelmRelease = crd.Annotations["meta.helm.sh/release-name"]
	c.KeepPolicy = crd.Annotations["helm.sh/resource-policy"] == "keep"
	return c
}

// runPreflight reads the cluster's CRDs and webhook configurations and judges them.
func runPreflight(ctx context.Context, kube client.Client) (preflightReport, error) {
	var r preflightReport
	for _, name := range slices.Sorted(maps.Keys(ServedVersions)) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := kube.Get(ctx, client.ObjectKey{Name: name}, crd)
		switch {
		case apierrors.IsNotFound(err):
			crd = nil
		case err != nil:
			return r, fmt.Errorf("reading CRD %s: %w", name, err)
		}
		r.CRDs = append(r.CRDs, checkCRD(name, crd))
	}
	machines := &apiextensionsv1.CustomResourceDefinition{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "machines.karpenter.sh"}, machines); err == nil {
		r.Machines = true
	} else if !apierrors.IsNotFound(err) {
		return r, fmt.Errorf("reading CRD machines.karpenter.sh: %w", err)
	}
	var validating admissionv1.ValidatingWebhookConfigurationList
	var mutating admissionv1.MutatingWebhookConfigurationList
	if err := kube.List(ctx, &validating); err != nil {
		return r, fmt.Errorf("listing validating webhook configurations: %w", err)
	}
	if err := kube.List(ctx, &mutating); err != nil {
		return r, fmt.Errorf("listing mutating webhook configurations: %w", err)
	}
	for _, w := range validating.Items {
		if strings.Contains(w.Name, "karpenter") {
			r.Webhooks = append(r.Webhooks, "validatingwebhookconfiguration/"+w.Name)
		}
	}
	for _, w := range mutating.Items {
		if strings.Contains(w.Name, "karpenter") {
			r.Webhooks = append(r.Webhooks, "mutatingwebhookconfiguration/"+w.Name)
		}
	}
	r.Ready = true
	for _, c := range r.CRDs {
		if len(c.Unserved) > 0 {
			r.Ready = false
		}
	}
	return r, nil
}

// errNotReady is preflight's failure: the report says why.
//
//lint:ignore ST1005 the sentence starts with a name
var errNotReady = errors.New("Fleetwright's CRDs cannot be applied to this cluster yet (see above)")

func preflightCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := newFlagSet("preflight", &o, stderr)
	pos, err := parse(fs, &o, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("preflight takes no arguments, got %q", pos)
	}
	kube, err := o.kube()
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	r, err := runPreflight(cctx, kube)
	if err != nil {
		return err
	}
	if o.output == "json" {
		if err := printJSON(stdout, r); err != nil {
			return err
		}
	} else {
		printPreflight(stdout, r)
	}
	if !r.Ready {
		return errNotReady
	}
	return nil
}

// printPreflight writes the report for people: a line per CRD, then what to do, in order.
func printPreflight(w io.Writer, r preflightReport) {
	for _, c := range r.CRDs {
		switch {
		case !c.Installed:
			fmt.Fprintf(w, "ok    %-36s not installed: Fleetwright's CRD installs cleanly\n", c.CRD)
		case len(c.Unserved) > 0:
			fmt.Fprintf(w, "FAIL  %-36s status.storedVersions %v: Fleetwright serves %v only, so the API server refuses its CRD until %v is migrated away\n",
				c.CRD, c.StoredVersions, ServedVersions[c.CRD], c.Unserved)
		default:
			fmt.Fprintf(w, "ok    %-36s status.storedVersions %v\n", c.CRD, c.StoredVersions)
		}
	}
	for _, c := range r.CRDs {
		if len(c.Unserved) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s: migrate its stored objects to %s, with Karpenter still running (its conversion webhook reads them):\n", c.CRD, ServedVersions[c.CRD][0])
		if c.StorageVersion != ServedVersions[c.CRD][0] {
			fmt.Fprintf(w, "  0. Its storage version is %s: this is Karpenter before v1.0. Upgrade Karpenter to v1.0.x first, as Karpenter's v1 migration\n"+
				"     guide says (https://karpenter.sh/v1.0/upgrading/v1-migration/), then continue here.\n", c.StorageVersion)
		}
		fmt.Fprintf(w, "  1. Karpenter v1.0.2 and later v1.0.x patches migrate by themselves: each object is written again as v1 (annotated\n"+
			"     karpenter.sh/stored-version-migrated), then storedVersions is set to [v1]. Run the latest v1.0.x until\n"+
			"       kubectl get crd %[1]s -o jsonpath='{.status.storedVersions}'\n"+
			"     prints [\"v1\"]. Or by hand (Kubernetes' \"upgrade existing objects to a new stored version\"):\n"+
			"  2. kubectl get %[1]s -A -o json | kubectl replace -f -\n"+
			"  3. kubectl patch crd %[1]s --subresource=status --type=merge -p '{\"status\":{\"storedVersions\":[\"%[2]s\"]}}'\n",
			c.CRD, ServedVersions[c.CRD][0])
	}
	var notes []string
	for _, c := range r.CRDs {
		if c.Webhook != "" {
			notes = append(notes, fmt.Sprintf("%s converts through the webhook service %s: once Karpenter stops, every read of it fails until Fleetwright's CRD (no webhook) is applied; apply it right after stopping Karpenter.", c.CRD, c.Webhook))
		}
		if c.HelmRelease != "" && !c.KeepPolicy {
			notes = append(notes, fmt.Sprintf("%s belongs to the Helm release %q: `kubectl annotate crd %s helm.sh/resource-policy=keep` before that release is ever uninstalled, or uninstalling it deletes the CRD and every object of its kind.", c.CRD, c.HelmRelease, c.CRD))
		}
	}
	if len(r.Webhooks) > 0 {
		notes = append(notes, fmt.Sprintf("Karpenter's admission webhooks are installed (%s): with no Karpenter pod behind them they block writes; delete them when Karpenter stops.", strings.Join(r.Webhooks, ", ")))
	}
	if r.Machines {
		notes = append(notes, "machines.karpenter.sh exists (Karpenter v0.28–v0.31): Fleetwright does not read Machines; remove their owner references from the nodes before deleting them (docs/migration.md).")
	}
	if len(notes) > 0 {
		fmt.Fprintln(w, "\nAlso:")
		for _, n := range notes {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
	if r.Ready {
		fmt.Fprintln(w, "\nready: kubectl apply --server-side --force-conflicts -k deploy/crds")
	}
}
