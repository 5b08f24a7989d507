package holds

import (
	"fmt"
	"strings"
	"time"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/providers/event"
)

// Label is how a digest groups a held wake: by what happened.
func Label(it Item) string {
	switch it.Type {
	case event.TypeGitHubPullRequestClosed:
		if it.Merged {
			return "merged"
		}
		return "closed"
	case event.TypeGitHubPullRequestReady:
		return "ready"
	case event.TypeGitHubPullRequestChecksFailed:
		return "checks failed"
	case event.TypeGitHubPullRequestDequeued:
		return "kicked out of the merge queue"
	case event.TypeGitHubPullRequestStuck:
		return "stuck"
	case event.TypeGitHubPullRequestOpened, event.TypeGitHubPullRequestReopened, event.TypeGitHubPullRequestLinked:
		return "opened"
	case event.TypeGitHubPullRequestReviewSubmitted:
		return "review"
	case event.TypeSessionCrashed:
		return "crashed"
	case event.TypeSessionPermissionRequested:
		return "permission requested"
	case event.TypeSessionAwaitingInput:
		return "awaiting input"
	case event.TypeSessionTurnEnded:
		return "idle"
	case event.TypeSessionStalled:
		return "stalled"
	case event.TypeMessageSent:
		return "message"
	}
	return it.Type
}

// subjectName is how a digest names a subject: a PR by its number, else
// the subject itself.
func subjectName(subject string) string {
	if strings.HasPrefix(subject, "github:") {
		if i := strings.LastIndexByte(subject, '#'); i >= 0 {
			return subject[i:]
		}
	}
	return subject
}

func hm(t time.Time) string { return t.UTC().Format("15:04") + "Z" }

// Text is a digest's line (docs/design.md §7): "[quiet lifted 02:50Z; held
// 02:12Z–02:51Z; 7 events] merged: #12 #13 · checks failed: #20 · …",
// grouped by what happened in the order first seen, naming each subject
// once per group.
func Text(reason string, items []Item, now time.Time) string {
	head := map[string]string{ReasonQuiet: "quiet lifted", ReasonQuietHours: "quiet hours ended", ReasonPaused: "pause ended",
		ReasonRate: "rate cap"}[reason]
	if head == "" {
		head = reason
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[%s %s", head, hm(now))
	if len(items) > 0 {
		first, last := items[0].At, items[0].At
		for _, it := range items {
			if it.At.Before(first) {
				first = it.At
			}
			if it.At.After(last) {
				last = it.At
			}
		}
		fmt.Fprintf(&b, "; held %s–%s", hm(first), hm(last))
	}
	n := "events"
	if len(items) == 1 {
		n = "event"
	}
	fmt.Fprintf(&b, "; %d %s]", len(items), n)
	var order []string
	groups := map[string][]string{}
	seen := map[string]bool{}
	for _, it := range items {
		l := Label(it)
		if _, ok := groups[l]; !ok {
			order = append(order, l)
			groups[l] = nil
		}
		name := subjectName(it.Subject)
		if name == "" {
			name = it.ID
		}
		if !seen[l+"\x00"+name] {
			seen[l+"\x00"+name] = true
			groups[l] = append(groups[l], name)
		}
	}
	for i, l := range order {
		if i == 0 {
			b.WriteString(" ")
		} else {
			b.WriteString(" · ")
		}
		b.WriteString(l + ": " + strings.Join(groups[l], " "))
	}
	return b.String()
}

// Entries are a digest's entries (docs/design.md §8 "digest": [<entries>]): one
// per held wake, grouped by label in the order first seen, as the inbox
// update that decided it.
func Entries(items []Item) []inbox.Entry {
	var order []string
	byLabel := map[string][]Item{}
	for _, it := range items {
		l := Label(it)
		if _, ok := byLabel[l]; !ok {
			order = append(order, l)
		}
		byLabel[l] = append(byLabel[l], it)
	}
	out := make([]inbox.Entry, 0, len(items))
	for _, l := range order {
		for _, it := range byLabel[l] {
			it.Event = event.Canonical(it.Event) // held before lineage was a string
			out = append(out, inbox.Entry{Seq: it.Seq, Type: it.Type, Subject: it.Subject, Count: 1, Priority: it.Priority,
				Kind: it.Kind, Summary: it.Summary, FirstAt: it.At, LastAt: it.At, Event: it.Event, Latest: it.Event,
				FoldedIDs: []string{it.ID}, Wake: true, WakeSeq: it.Seq})
		}
	}
	return out
}

// Digest is one released digest: who it is for, its line and entries.
type Digest struct {
	Party     string        `json:"party"`
	Reason    string        `json:"reason"`
	WebhookID string        `json:"webhook_id,omitempty"` // empty when the party has no endpoint
	Text      string        `json:"text"`
	Entries   []inbox.Entry `json:"digest"`
}
