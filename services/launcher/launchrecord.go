package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clock"
)

// A launch is recorded on its NodeClaim before CreateFleet is called: when, by which delivery,
// and the launch templates it may use. The record is what makes a redelivered intent safe
// against EC2's eventual consistency: the lookup of the claim's instance by its tag
// (claimInstance) can miss an instance launched a moment ago, and a request that changed since
// (another unavailable set, another subnet) is another ClientToken, which EC2 would answer with
// a second instance. A delivery that finds a recent record of another looks for the instance
// until the record is --launch-lookup-wait old before it launches again; one that finds another
// delivery's record being written at the same time leaves the claim to it. A delivery whose
// request is the recorded one (the same ClientToken: nothing changed, as after a launcher killed
// mid-launch) neither waits nor yields: EC2 answers a token it has seen with the instance it
// made for it. The orphan collector ends any second instance that still gets through. The
// templates named keep the garbage collector from deleting them while the claim lives
// (templates.collect).
//
//	fleetwright.io/launch-requested: 2026-01-02T03:04:05.123456789Z/<delivery nonce>/<ClientToken>
//	fleetwright.io/launch-templates: fleetwright/<cluster>/<hash>,...
const (
	launchRequestedAnnotation = "fleetwright.io/launch-requested"
	launchTemplatesAnnotation = "fleetwright.io/launch-templates"
)

// maxLookupWait bounds --launch-lookup-wait: the wait runs within one handling of the intent,
// whose deadline is a minute.
const maxLookupWait = 45 * time.Second

// lookupEvery is how often the instance of an earlier launch is looked for.
const lookupEvery = time.Second

// launchRecord is one delivery's record of asking EC2 for a claim's instance.
type launchRecord struct {
	At        time.Time
	Nonce     string
	Token     string // the CreateFleet ClientToken asked with; empty in records of older launchers
	Templates []string
}

// sameRequest says the record is of a request with the given ClientToken, which EC2 answers
// with the instance it made for the recorded one.
func (r launchRecord) sameRequest(token string) bool { return r.Token != "" && r.Token == token }

func (r launchRecord) isZero() bool { return r.At.IsZero() }

// recordOf reads a claim's launch record (zero if none, or unreadable).
func recordOf(annotations map[string]string) launchRecord {
	at, nonce, ok := strings.Cut(annotations[launchRequestedAnnotation], "/")
	t, err := time.Parse(time.RFC3339Nano, at)
	if !ok || err != nil {
		return launchRecord{}
	}
	nonce, token, _ := strings.Cut(nonce, "/")
	r := launchRecord{At: t, Nonce: nonce, Token: token}
	if v := annotations[launchTemplatesAnnotation]; v != "" {
		r.Templates = strings.Split(v, ",")
	}
	return r
}

// write puts the record on a claim's annotations.
func (r launchRecord) write(nc *karpv1.NodeClaim) {
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	v := r.At.UTC().Format(time.RFC3339Nano) + "/" + r.Nonce
	if r.Token != "" {
		v += "/" + r.Token
	}
	nc.Annotations[launchRequestedAnnotation] = v
	nc.Annotations[launchTemplatesAnnotation] = strings.Join(slices.Sorted(slices.Values(r.Templates)), ",")
}

// newNonce names one delivery's launch.
func newNonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// errLaunchInFlight says another delivery recorded a launch of the claim a moment ago and may
// be waiting for EC2's answer: this one leaves the claim to it and is retried later.
var errLaunchInFlight = errors.New("another delivery is launching this nodeclaim")

// errLaunchedMeanwhile says the claim recorded its instance while this delivery prepared.
var errLaunchedMeanwhile = errors.New("the nodeclaim recorded its instance meanwhile")

// awaitEarlierLaunch looks for the instance of the claim's recorded launch, if another delivery
// asked for one less than --launch-lookup-wait ago with another request, until it shows or the
// record is that old: ok with the instance's launch info if it shows. Without a recent record
// of another delivery's different request it returns at once.
func (l *launcher) awaitEarlierLaunch(ctx context.Context, claim claimState, nonce, token string, infoOf func(launched) launchInfo,
	log zerolog.Logger) (launchInfo, bool, error) {
	rec := claim.Launch
	if rec.isZero() || rec.Nonce == nonce || !l.now().Before(rec.At.Add(l.cfg.LookupWait)) {
		return launchInfo{}, false, nil
	}
	if rec.sameRequest(token) {
		log.Info().Time("requested", rec.At).Msg("an earlier delivery asked EC2 for this nodeclaim's instance with the same request; " +
			"asking again with its ClientToken, which EC2 answers with the same instance")
		return launchInfo{}, false, nil
	}
	log.Info().Time("requested", rec.At).Dur("lookingFor", rec.At.Add(l.cfg.LookupWait).Sub(l.now()).Round(time.Second)).
		Msg("an earlier delivery asked EC2 for this nodeclaim's instance; looking for it before launching again")
	for {
		if info, ok, err := l.adopt(ctx, claim, infoOf); err != nil || ok {
			return info, ok, err
		}
		if !l.now().Before(rec.At.Add(l.cfg.LookupWait)) {
			log.Info().Time("requested", rec.At).Msg("no instance of the earlier launch showed; launching")
			return launchInfo{}, false, nil
		}
		if !clock.Sleep(ctx, lookupEvery) {
			return launchInfo{}, false, ctx.Err()
		}
	}
}

// recordLaunch writes this delivery's launch record on the claim as the API server has it now,
// unless the claim was launched meanwhile (errLaunchedMeanwhile), is another of the same name
// (errClaimNotFound), or carries another delivery's record less than --launch-lookup-wait old
// of a different request, which this delivery did not wait out (errLaunchInFlight).
func (k *kubeClaims) RecordLaunch(ctx context.Context, name, uid string, rec launchRecord, wait time.Duration) error {
	var refused error
	err := k.update(ctx, name, func(nc *karpv1.NodeClaim) {
		refused = nil
		prior := recordOf(nc.Annotations)
		switch {
		case string(nc.UID) != uid:
			refused = errClaimNotFound
		case nc.Status.ProviderID != "":
			refused = errLaunchedMeanwhile
		case !prior.isZero() && prior.Nonce != rec.Nonce && rec.At.Before(prior.At.Add(wait)) && !prior.sameRequest(rec.Token):
			refused = fmt.Errorf("%w (recorded at %s)", errLaunchInFlight, prior.At.Format(time.RFC3339Nano))
		default:
			rec.write(nc)
		}
	})
	if err != nil {
		return err
	}
	return refused
}
