// Package event is the contract every stage of wakegate shares: the
// CloudEvents 1.0 envelope with wakegate's extension attributes, the
// vocabulary of types (priority, attended kind, terminal), and the grammar
// of party ids, types and subjects (docs/design.md §2).
//
// It imports nothing of wakegate's own: providers produce Events, the
// journal stores them, workers route them.
package event

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// SpecVersion is the only CloudEvents version wakegate accepts and emits.
const SpecVersion = "1.0"

// Event is a CloudEvent in structured JSON with wakegate's extensions.
// Field order is the order a person reads it in.
type Event struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Subject         string          `json:"subject,omitempty"`
	Time            time.Time       `json:"time"`
	DataContentType string          `json:"datacontenttype,omitempty"`
	Seq             string          `json:"seq,omitempty"`
	Workspace       string          `json:"workspace"`
	SessionID       string          `json:"sessionid,omitempty"`
	Lineage         Lineage         `json:"lineage,omitempty"`
	Priority        Priority        `json:"priority,omitempty"`
	CoalesceKey     string          `json:"coalescekey,omitempty"`
	Terminal        bool            `json:"terminal,omitempty"`
	Summary         string          `json:"summary,omitempty"`
	Replay          bool            `json:"replay,omitempty"`
	Data            json.RawMessage `json:"data,omitempty"`
	// DataBase64 is binary data: data_base64 in the JSON format, with its
	// datacontenttype (never set together with Data).
	DataBase64 []byte `json:"data_base64,omitempty"`
	// Extensions are a client's own extension attributes (docs/design.md
	// §2): valid names (ValidExtensionName), each value a JSON scalar. They
	// are written beside the other attributes, sorted by name.
	Extensions map[string]json.RawMessage `json:"-"`
}

// Key is the (source, id) identity of an event: every dedup, ledger and
// idempotency key is derived from it.
func (e *Event) Key() string { return e.Source + "\x00" + e.ID }

// Priority orders how much an event needs its recipient.
type Priority string

// Priorities, lowest first. Internal events are never routed.
const (
	Info      Priority = "info"
	Attention Priority = "attention"
	Critical  Priority = "critical"
	Internal  Priority = "internal"
)

// Rank orders priorities: info < attention < critical; unknown is -1.
func (p Priority) Rank() int {
	switch p {
	case Info:
		return 0
	case Attention:
		return 1
	case Critical:
		return 2
	}
	return -1
}

// Kind is how an attention+ event reaches an attended recipient (docs/design.md §7).
type Kind string

// Kinds of the vocabulary's "attended →" column.
const (
	KindNone   Kind = ""
	KindNotice Kind = "notice"
	KindAlert  Kind = "alert"
)

// Spec is one row of the vocabulary.
type Spec struct {
	Priority Priority
	Kind     Kind
	Terminal bool
}

// vocabulary holds the rows of docs/design.md §2 whose properties do not depend on
// the event's data. Lookup refines the rest.
var vocabulary = map[string]Spec{
	TypeSessionCrashed:             {Critical, KindAlert, false},
	TypeSessionPermissionRequested: {Critical, KindAlert, false},
	TypeSessionAwaitingInput:       {Attention, KindNotice, false},
	TypeSessionTurnEnded:           {Info, KindNotice, false}, // idle=true → attention
	TypeSessionStalled:             {Attention, KindNotice, false},
	TypeSessionExited:              {Info, KindNone, true},
	TypeSessionSpawned:             {Info, KindNone, false},
	TypeSessionResumed:             {Info, KindNone, false},
	TypeSessionReaped:              {Info, KindNone, false},
	TypeSessionTurnStarted:         {Info, KindNone, false},
	TypeSessionHandoffSuggested:    {Info, KindNone, false},
	TypeSessionPaused:              {Info, KindNone, false},
	TypeSessionPrompted:            {Info, KindNone, false},
	TypeSessionPrOpened:            {Info, KindNone, false},
	TypeMessageSent:                {Attention, KindNotice, false}, // blocker → critical alert
	TypePolicyFailed:               {Attention, KindNotice, false},
	TypePolicyDone:                 {Info, KindNotice, false},
	TypeCronUnhealthy:              {Attention, KindNotice, false},

	TypeGitHubPullRequestOpened:           {Attention, KindNotice, false},
	TypeGitHubPullRequestReopened:         {Attention, KindNotice, false},
	TypeGitHubPullRequestLinked:           {Attention, KindNotice, false},
	TypeGitHubPullRequestReady:            {Attention, KindNotice, false},
	TypeGitHubPullRequestChecksFailed:     {Attention, KindAlert, false},
	TypeGitHubPullRequestClosed:           {Attention, KindNotice, true}, // merged → alert
	TypeGitHubPullRequestDequeued:         {Attention, KindAlert, false},
	TypeGitHubPullRequestStuck:            {Attention, KindAlert, false},
	TypeGitHubPullRequestReviewSubmitted:  {Info, KindAlert, false}, // approved/changes_requested → attention
	TypeGitHubPullRequestSynchronize:      {Info, KindNone, false},
	TypeGitHubPullRequestConvertedToDraft: {Info, KindNone, false},
	TypeGitHubPullRequestReadyForReview:   {Info, KindNone, false},
	TypeGitHubPullRequestEdited:           {Info, KindNone, false},
	TypeGitHubPullRequestLabeled:          {Info, KindNone, false},
	TypeGitHubCheckSuiteCompleted:         {Info, KindNone, false},
	TypeGitHubCheckRunCompleted:           {Info, KindNone, false},
	TypeGitHubStatus:                      {Info, KindNone, false},
	TypeGitHubDeploymentStatus:            {Info, KindNotice, false}, // failure → attention
	TypeGitHubIssueCommentCreated:         {Info, KindNone, false},
	TypeGitHubPing:                        {Info, KindNone, false},

	TypeWakegateFaultUndeliverable: {Internal, KindNone, false},
	TypeWakegateEscalated:          {Internal, KindNone, false},
	TypeWakegateDigest:             {Internal, KindNone, false},
	TypeWakegateLinkConflict:       {Internal, KindNone, false},
	TypeWakegateLinkRefused:        {Internal, KindNone, false},
	TypeWakegateRedelivered:        {Internal, KindNone, false},
}

// Lookup returns the vocabulary row of a type. Types outside the table
// (agents may push any dotted type) are info; github.installation.* is info.
func Lookup(typ string) Spec {
	if s, ok := vocabulary[typ]; ok {
		return s
	}
	if strings.HasPrefix(typ, "wakegate.") {
		return Spec{Priority: Internal}
	}
	return Spec{Priority: Info}
}

// DefaultPriority is the priority the vocabulary gives an event of this type
// with this data: the rows whose priority depends on data are refined here.
func DefaultPriority(typ string, data json.RawMessage) Priority {
	p := Lookup(typ).Priority
	var d struct {
		Idle    bool   `json:"idle"`
		Blocker bool   `json:"blocker"`
		State   string `json:"state"`
	}
	if len(data) > 0 {
		_ = json.Unmarshal(data, &d) // data that is not an object refines nothing
	}
	switch typ {
	case "session.turn_ended":
		if d.Idle {
			return Attention
		}
	case "message.sent":
		if d.Blocker {
			return Critical
		}
	case "github.pull_request_review.submitted":
		if d.State == "approved" || d.State == "changes_requested" {
			return Attention
		}
	case "github.deployment_status":
		if d.State == "failure" || d.State == "error" {
			return Attention
		}
	}
	return p
}

// idGrammar is what ValidID accepts, as error messages name it.
const idGrammar = `^[A-Za-z0-9._-]{1,128}$`

// ValidID reports whether s is a valid party, session or workspace id:
// it matches idGrammar (checked byte by byte, without a regexp: every
// event and delivery checks a few).
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ValidWorkspace reports whether s is a valid workspace name.
func ValidWorkspace(s string) bool { return ValidID(s) }

// ValidType reports whether s follows the dotted type grammar
// ^[a-z0-9_]+(\.[a-z0-9_]+)+$, at most 128 bytes.
func ValidType(s string) bool {
	if len(s) > 128 {
		return false
	}
	dots, prev := 0, byte('.') // a leading dot is an empty segment
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.':
			if prev == '.' {
				return false
			}
			dots++
		case !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_'):
			return false
		}
		prev = c
	}
	return dots > 0 && prev != '.'
}

// Party is who can receive or act: session:<id> or human:<channel>.
type Party string

// ParseParty validates a party id such as "session:abc" or "human:ops".
func ParseParty(s string) (Party, error) {
	kind, id, ok := strings.Cut(s, ":")
	if !ok || (kind != "session" && kind != "human") || !ValidID(id) {
		return "", fmt.Errorf("party %q: want session:<id> or human:<channel> with id matching %s", s, idGrammar)
	}
	return Party(s), nil
}

// Session returns the session id of a session party, or "".
func (p Party) Session() string {
	if id, ok := strings.CutPrefix(string(p), "session:"); ok {
		return id
	}
	return ""
}

// SessionSubject is the subject of events about a session.
func SessionSubject(id string) string { return "session:" + id }

// PRSubject is the subject of events about a pull request.
func PRSubject(repo string, number int) string { return fmt.Sprintf("github:%s#%d", repo, number) }

// ShaSubject is the subject of a check or status whose PR is not known yet.
func ShaSubject(repo, sha string) string { return "github:" + repo + "@" + sha }

// GitHubSource is the CloudEvents source of facts about a repository.
func GitHubSource(repo string) string { return "//github.com/" + repo }

// AgentSource is the source the server sets on an agent's events, so two
// pushers' ids never collide.
func AgentSource(workspace, sub string) string { return "//wakegate/" + workspace + "/" + sub }

// ServerSource is the source of events wakegate itself synthesizes about a
// workspace (link conflicts, faults, digests).
func ServerSource(workspace string) string { return "//wakegate/" + workspace }

// ShardKey is what picks an event's journal shard: the repository for
// GitHub subjects (so a PR's tracker, its repository's sha index and its
// journal entries share one Redis slot) and the subject otherwise.
func ShardKey(workspace, subject string) string {
	if rest, ok := strings.CutPrefix(subject, "github:"); ok {
		if i := strings.IndexAny(rest, "#@"); i >= 0 {
			rest = rest[:i]
		}
		return "github:" + rest
	}
	return workspace + "/" + subject
}
