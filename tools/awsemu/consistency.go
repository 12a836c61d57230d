package awsemu

import (
	"fmt"
	"slices"
	"time"
)

// EC2's Describe* calls are eventually consistent: an instance, and a tag put on it, show in
// DescribeInstances a while after they exist (AWS documents seconds; under load, longer). With
// a describe delay (Config.DescribeDelay, AWSEMU_DESCRIBE_DELAY, POST /_emu/consistency) the
// emulator answers so: an instance appears in DescribeInstances — by ID (InvalidInstanceID.
// NotFound until then), by filter and in its tag filters — the delay after its launch, and each
// CreateTags or DeleteTags on it shows the delay after it was made. Everything else (CreateFleet's
// answer, TerminateInstances, the admin API's instance list) sees the truth at once. Zero, the
// default, is strongly consistent, as the emulator always was.

// tagView is what DescribeInstances shows of an instance's tags from at on.
type tagView struct {
	at   time.Time
	tags []Tag
}

// SetDescribeDelay sets the describe delay for what is launched or tagged from now on.
func (e *Emulator) SetDescribeDelay(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("setting describe delay: %s is negative", d)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.describeDelay = d
	return nil
}

// hideLocked makes a just-launched instance, with its launch tags, show from the delay on.
func (e *Emulator) hideLocked(inst *instance) {
	if e.describeDelay <= 0 {
		return
	}
	inst.visibleAt = e.cfg.Clock.Now().Add(e.describeDelay)
	inst.tagViews = []tagView{{at: inst.visibleAt, tags: slices.Clone(inst.Tags)}}
}

// noteTagsLocked records that an instance's tags changed: the change shows from the delay on.
func (e *Emulator) noteTagsLocked(inst *instance) {
	if e.describeDelay <= 0 && len(inst.tagViews) == 0 {
		return
	}
	now := e.cfg.Clock.Now()
	// Views a later one already replaces are never shown again.
	for len(inst.tagViews) > 1 && !inst.tagViews[1].at.After(now) {
		inst.tagViews = inst.tagViews[1:]
	}
	inst.tagViews = append(inst.tagViews, tagView{at: now.Add(e.describeDelay), tags: slices.Clone(inst.Tags)})
}

// shown reports whether DescribeInstances shows the instance at now.
func (i *instance) shown(now time.Time) bool { return !now.Before(i.visibleAt) }

// shownTags are the tags DescribeInstances shows at now.
func (i *instance) shownTags(now time.Time) []Tag {
	if len(i.tagViews) == 0 {
		return i.Tags
	}
	var tags []Tag
	for _, v := range i.tagViews {
		if v.at.After(now) {
			break
		}
		tags = v.tags
	}
	return tags
}
