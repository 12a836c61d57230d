package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/smithy-go"
)

// IAMAPI is the instance-profile slice of IAM; *iam.Client satisfies it. Tests use the real
// client against the AWS emulator.
type IAMAPI interface {
	GetInstanceProfile(context.Context, *iam.GetInstanceProfileInput, ...func(*iam.Options)) (*iam.GetInstanceProfileOutput, error)
	CreateInstanceProfile(context.Context, *iam.CreateInstanceProfileInput, ...func(*iam.Options)) (*iam.CreateInstanceProfileOutput, error)
	DeleteInstanceProfile(context.Context, *iam.DeleteInstanceProfileInput, ...func(*iam.Options)) (*iam.DeleteInstanceProfileOutput, error)
	AddRoleToInstanceProfile(context.Context, *iam.AddRoleToInstanceProfileInput, ...func(*iam.Options)) (*iam.AddRoleToInstanceProfileOutput, error)
	RemoveRoleFromInstanceProfile(context.Context, *iam.RemoveRoleFromInstanceProfileInput, ...func(*iam.Options)) (*iam.RemoveRoleFromInstanceProfileOutput, error)
	TagInstanceProfile(context.Context, *iam.TagInstanceProfileInput, ...func(*iam.Options)) (*iam.TagInstanceProfileOutput, error)
	ListInstanceProfiles(context.Context, *iam.ListInstanceProfilesInput, ...func(*iam.Options)) (*iam.ListInstanceProfilesOutput, error)
}

// instanceProfiles gives each node class the instance profile its instances launch with. For a
// class with a role, as Karpenter does: a profile of its own, named <cluster>_<hash of region
// and class> (Karpenter's name, so a profile Karpenter made is reused), tagged as this
// cluster's, made on first use, holding the class's role (replaced when the role changes), and
// deleted with the class. A class naming an instanceProfile gets that one, once it is known to
// exist. Answers are remembered for ttl.
type instanceProfiles struct {
	api     IAMAPI
	cluster string
	region  string
	ttl     time.Duration
	now     func() time.Time

	mu sync.Mutex
	// making serialises ensure in this process: the workers and the status writer ask for a
	// new class's profile at once. Replicas racing each other are settled by IAM's answers.
	making sync.Mutex
	seen   map[string]seenProfile // by class name
}

// seenProfile is a profile found ready: for a role (or "" for a given profile), at a time.
type seenProfile struct {
	profile, role string
	at            time.Time
}

func newInstanceProfiles(api IAMAPI, cluster, region string, ttl time.Duration, now func() time.Time) *instanceProfiles {
	return &instanceProfiles{api: api, cluster: cluster, region: region, ttl: ttl, now: now, seen: map[string]seenProfile{}}
}

// errNoSuchProfile says a class's role or instance profile does not exist: the class must
// change (or the role be made) before it can launch.
var errNoSuchProfile = errors.New("does not exist")

// name is the profile made for a class: Karpenter's InstanceProfileName, the cluster and the
// FNV-1a hash of region and class name (what hashstructure gives for a string).
func (p *instanceProfiles) name(class string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(p.region + class))
	return fmt.Sprintf("%s_%d", p.cluster, h.Sum64())
}

// path holds every profile this launcher makes, so the ones of deleted classes can be listed.
func (p *instanceProfiles) path() string { return "/fleetwright/" + p.region + "/" + p.cluster + "/" }

// tags are the class's tags and the ownership tags Karpenter puts on the profiles it makes.
func (p *instanceProfiles) tags(class nodeClassSpec) map[string]string {
	tags := map[string]string{}
	for k, v := range class.Tags {
		tags[k] = v
	}
	tags["kubernetes.io/cluster/"+p.cluster] = "owned"
	tags["eks:eks-cluster-name"] = p.cluster
	tags[classTag] = class.Name
	tags["topology.kubernetes.io/region"] = p.region
	return tags
}

// resolve returns the name of the instance profile the class's instances launch with. An
// error wrapping errNoSuchProfile means the role or the given profile does not exist.
func (p *instanceProfiles) resolve(ctx context.Context, class nodeClassSpec) (string, error) {
	role := class.Role
	if i := strings.LastIndexByte(role, '/'); i >= 0 {
		role = role[i+1:] // a role given with its path or as an ARN: profiles take the bare name
	}
	want := class.InstanceProfile
	if want == "" {
		want = p.name(class.Name)
	}
	p.mu.Lock()
	s, ok := p.seen[class.Name]
	p.mu.Unlock()
	if ok && s.profile == want && s.role == role && p.now().Sub(s.at) < p.ttl {
		return want, nil
	}
	var err error
	switch {
	case class.InstanceProfile != "":
		role = ""
		err = p.check(ctx, want)
	case role != "":
		err = p.ensure(ctx, class, want, role)
	default:
		err = fmt.Errorf("node class %s names neither a role nor an instance profile", class.Name)
	}
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	p.seen[class.Name] = seenProfile{profile: want, role: role, at: p.now()}
	p.mu.Unlock()
	return want, nil
}

// check makes sure a given instance profile exists.
func (p *instanceProfiles) check(ctx context.Context, name string) error {
	_, err := p.api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if isNoSuchEntity(err) {
		return fmt.Errorf("instance profile %s %w (%s)", name, errNoSuchProfile, apiErrorText(err))
	}
	if err != nil {
		return fmt.Errorf("getting instance profile %s: %w", name, err)
	}
	return nil
}

// ensure makes the class's profile if IAM does not have it, tags it as this cluster's, and
// makes role its one role.
func (p *instanceProfiles) ensure(ctx context.Context, class nodeClassSpec, name, role string) error {
	p.making.Lock()
	defer p.making.Unlock()
	tags := p.tags(class)
	profile, err := p.get(ctx, name)
	if isNoSuchEntity(err) {
		created, cerr := p.api.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{
			InstanceProfileName: aws.String(name), Path: aws.String(p.path()), Tags: iamTags(tags),
		})
		switch {
		case cerr == nil:
			profile, err = created.InstanceProfile, nil
		case apiErrorCode(cerr) == "EntityAlreadyExists": // another replica made it just now
			profile, err = p.get(ctx, name)
		default:
			return fmt.Errorf("creating instance profile %s: %w", name, cerr)
		}
	}
	if err != nil {
		return fmt.Errorf("getting instance profile %s: %w", name, err)
	}
	if missing := missingTags(profile.Tags, tags); len(missing) > 0 {
		if _, err := p.api.TagInstanceProfile(ctx, &iam.TagInstanceProfileInput{InstanceProfileName: aws.String(name), Tags: iamTags(missing)}); err != nil {
			return fmt.Errorf("tagging instance profile %s: %w", name, err)
		}
	}
	// A profile holds at most one role.
	for _, r := range profile.Roles {
		if aws.ToString(r.RoleName) == role {
			return nil
		}
		_, err := p.api.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: r.RoleName})
		if err != nil && !isNoSuchEntity(err) {
			return fmt.Errorf("removing role %s from instance profile %s: %w", aws.ToString(r.RoleName), name, err)
		}
	}
	_, err = p.api.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(role)})
	if apiErrorCode(err) == "LimitExceeded" {
		// Another replica added a role just now: fine if it is this one.
		if again, gerr := p.get(ctx, name); gerr == nil && slices.ContainsFunc(again.Roles, func(r iamtypes.Role) bool { return aws.ToString(r.RoleName) == role }) {
			return nil
		}
	}
	if isNoSuchEntity(err) {
		return fmt.Errorf("role %s %w (%s)", role, errNoSuchProfile, apiErrorText(err))
	}
	if err != nil {
		return fmt.Errorf("adding role %s to instance profile %s: %w", role, name, err)
	}
	return nil
}

func (p *instanceProfiles) get(ctx context.Context, name string) (*iamtypes.InstanceProfile, error) {
	out, err := p.api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err != nil {
		return nil, err
	}
	return out.InstanceProfile, nil
}

// collect deletes the profiles this launcher made for classes that no longer exist (classes
// holds the names of those that do), role first, as IAM requires.
func (p *instanceProfiles) collect(ctx context.Context, classes map[string]bool) (int, error) {
	keep := map[string]bool{}
	for class := range classes {
		keep[p.name(class)] = true
	}
	deleted := 0
	for page, err := range pages(ctx, iam.NewListInstanceProfilesPaginator(p.api, &iam.ListInstanceProfilesInput{PathPrefix: aws.String(p.path())})) {
		if err != nil {
			return deleted, fmt.Errorf("listing instance profiles: %w", err)
		}
		for _, listed := range page.InstanceProfiles {
			name := aws.ToString(listed.InstanceProfileName)
			if keep[name] {
				continue
			}
			gone, err := p.delete(ctx, name)
			if err != nil {
				return deleted, err
			}
			if gone {
				deleted++
			}
		}
	}
	return deleted, nil
}

// delete deletes one profile if it is this cluster's (listings leave tags out: they are read
// here), and forgets it.
func (p *instanceProfiles) delete(ctx context.Context, name string) (bool, error) {
	out, err := p.api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if isNoSuchEntity(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("getting instance profile %s: %w", name, err)
	}
	if len(missingTags(out.InstanceProfile.Tags, map[string]string{"kubernetes.io/cluster/" + p.cluster: "owned"})) > 0 {
		return false, nil
	}
	for _, r := range out.InstanceProfile.Roles {
		_, err := p.api.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: r.RoleName})
		if err != nil && !isNoSuchEntity(err) {
			return false, fmt.Errorf("removing role %s from instance profile %s: %w", aws.ToString(r.RoleName), name, err)
		}
	}
	if _, err := p.api.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil && !isNoSuchEntity(err) {
		return false, fmt.Errorf("deleting instance profile %s: %w", name, err)
	}
	p.mu.Lock()
	for class, s := range p.seen {
		if s.profile == name {
			delete(p.seen, class)
		}
	}
	p.mu.Unlock()
	return true, nil
}

// apiErrorText is the AWS error's code and message without the request id, so a status
// written from it changes only when the error does.
func apiErrorText(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode() + ": " + ae.ErrorMessage()
	}
	return err.Error()
}

func isNoSuchEntity(err error) bool { return err != nil && apiErrorCode(err) == "NoSuchEntity" }

func iamTags(tags map[string]string) []iamtypes.Tag {
	out := make([]iamtypes.Tag, 0, len(tags))
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		out = append(out, iamtypes.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	return out
}

// missingTags are the tags of want that have is without, or with another value.
func missingTags(have []iamtypes.Tag, want map[string]string) map[string]string {
	got := map[string]string{}
	for _, t := range have {
		got[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	out := map[string]string{}
	for k, v := range want {
		if cur, ok := got[k]; !ok || cur != v {
			out[k] = v
		}
	}
	return out
}
