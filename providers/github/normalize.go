package github

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/wakegate/wakegate/providers/event"
)

// Fact is what one delivery tells wakegate, before the PR tracker resolves
// subjects and synthesizes ready/checks_failed.
type Fact struct {
	Event, Action string
	Repo          string // "org/repo"; "" when the payload names none (installation)
	Ignored       string // non-empty: nothing to journal or track, e.g. "action not mapped: pull_request.assigned"
	// Type is the normalized event type. "" means tracker input only,
	// nothing journaled (e.g. check_run.created → pending).
	Type string
	// Subject is set when the payload fixes it (PR events, reviews,
	// comments, deployments, installation); "" for check_run, check_suite
	// and status, which the tracker resolves through PRs or its sha index.
	Subject string
	// ID is "" when the tracker assigns "<guid>" or "<guid>/<n>"; otherwise
	// a fixed fact id, so webhook, redelivery and reconciliation produce one
	// event: closed is "pr/<number>/closed/<closed_at RFC 3339 UTC>".
	ID string
	// Time is the payload's own time of the fact (updated_at, completed_at,
	// submitted_at, closed_at …) in UTC; zero when the payload carries none,
	// and the caller stamps the time it received the delivery.
	Time        time.Time
	Priority    event.Priority // event.DefaultPriority(Type, Data); "" when Type is ""
	CoalesceKey string         // "" = subject; deployment_status: "github:org/repo/deployment/<id>"
	Terminal    bool           // closed
	Summary     string         // one line a person can read
	// Data is what a recipient needs, not the payload: a compact JSON object.
	Data   json.RawMessage
	PR     *PRFact     // pull_request events
	Check  *CheckFact  // check_run, check_suite, status
	Review *ReviewFact // pull_request_review
}

// PRFact is the PR tracker's input from a pull_request event.
type PRFact struct {
	Number              int
	Action, State       string // State: "open" | "closed"
	Draft, Merged       bool
	Head, Base          string // head sha, base branch
	Author, Title       string
	Labels              []string
	ClosedAt, UpdatedAt time.Time
	// Trailer is the session a "Wakegate-Session: <id>" line of the body
	// names, on opened and edited only ("" for none): the tracker links
	// the PR to it while nothing claims the PR (docs/design.md §3).
	Trailer string `json:",omitempty"`
}

// trailerRe is a "Wakegate-Session: <id>" line of a PR body (the key is
// case-insensitive, as git trailers are).
var trailerRe = regexp.MustCompile(`(?mi)^[ \t]*wakegate-session:[ \t]*(?:session:)?([^\s]+)[ \t]*\r?$`)

// trailer returns the session the last Wakegate-Session line of body
// names, or "" when there is none or it is not a session id.
func trailer(body string) string {
	if !strings.Contains(strings.ToLower(body), "wakegate-session") {
		return ""
	}
	m := trailerRe.FindAllStringSubmatch(body, -1)
	if len(m) == 0 || !event.ValidID(m[len(m)-1][1]) {
		return ""
	}
	return m[len(m)-1][1]
}

// Check results.
const (
	ResultPass    = "pass"
	ResultFail    = "fail"
	ResultPending = "pending"
)

// CheckFact is the PR tracker's input from a check_run, check_suite or
// status event: one result for one name at one sha.
type CheckFact struct {
	SHA    string
	Name   string // check run name, status context, or "suite:<check_suite.id>" for a suite (a suite covers only its own runs)
	Suite  bool
	Result string    // ResultPass, ResultFail or ResultPending
	At     time.Time // payload timestamp deciding "latest per name" (check_run: completed_at, else started_at; status: updated_at; suite: updated_at)
	PRs    []int     // numbers from pull_requests (may be empty: fork PRs, status events)
}

// ReviewFact is the PR tracker's input from a pull_request_review event.
type ReviewFact struct {
	Number   int
	Reviewer string
	State    string // lowercase approved | changes_requested | commented | dismissed
	At       time.Time
	CommitID string
}

// validRepo reports whether s follows GitHub's owner/name grammar,
// ^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+$: it keeps subjects parseable (no '#',
// '@' or '/' inside either part).
func validRepo(s string) bool {
	slash := -1
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		case c == '/' && slash < 0:
			slash = i
		default:
			return false
		}
	}
	return slash > 0 && slash < len(s)-1
}

// prActions are the pull_request actions wakegate journals (docs/design.md §2).
var prActions = map[string]bool{
	"opened": true, "reopened": true, "closed": true, "synchronize": true,
	"converted_to_draft": true, "ready_for_review": true, "edited": true,
	"labeled": true, "dequeued": true,
}

// Normalize maps one delivery — eventType is X-GitHub-Event, body the JSON
// payload (for form bodies, the payload= field) — to a Fact. Events and
// actions wakegate does not map come back with Ignored set and a nil error.
// Malformed JSON, or a payload missing what its mapping needs, returns an
// error wrapping ErrMalformed.
func Normalize(eventType string, body []byte) (Fact, error) {
	env, pre, err := decodePayload(eventType, body)
	if err != nil {
		return Fact{}, malformed(eventType, err)
	}
	return normalize(eventType, body, env, pre)
}

// normalize is Normalize after decodePayload.
func normalize(eventType string, body []byte, env envelope, pre any) (Fact, error) {
	var err error
	f := Fact{Event: eventType, Action: env.Action, Repo: env.Repository.FullName}
	switch eventType {
	case "ping":
		f.Ignored = "ping"
	case "pull_request":
		err = f.pullRequest(body, pre)
	case "check_run":
		err = f.checkRun(body, pre)
	case "check_suite":
		err = f.checkSuite(body, pre)
	case "status":
		err = f.status(body, pre)
	case "pull_request_review":
		err = f.review(body, pre)
	case "issue_comment":
		err = f.issueComment(body, pre)
	case "deployment_status":
		err = f.deploymentStatus(body, pre)
	case "installation":
		err = f.installation(body, pre)
	default:
		f.Ignored = "event not mapped: " + eventType
	}
	if err != nil {
		return Fact{}, err
	}
	if f.Ignored == "" && f.Type != "" {
		f.Priority = defaultPriority(f.Type, f.Data)
	}
	return f, nil
}

// defaultPriority is event.DefaultPriority(typ, data). Of the GitHub
// types, only a review's and a deployment status's priority reads their
// data (its state); the others are given none, which spares decoding the
// data again (FuzzNormalizeOnePass holds this to event.DefaultPriority
// with the data).
func defaultPriority(typ string, data json.RawMessage) event.Priority {
	switch typ {
	case event.TypeGitHubPullRequestReviewSubmitted, event.TypeGitHubDeploymentStatus:
		return event.DefaultPriority(typ, data)
	}
	return event.DefaultPriority(typ, nil)
}

func (f *Fact) pullRequest(body []byte, pre any) error {
	if !prActions[f.Action] {
		return f.ignoreAction()
	}
	p, err := payloadAs[pullRequestPayload](f, body, pre)
	if err != nil {
		return err
	}
	pr := p.PullRequest
	if pr == nil {
		return f.missing("pull_request")
	}
	if pr.Number == 0 {
		pr.Number = p.Number
	}
	if pr.Number <= 0 {
		return f.missing("pull_request.number")
	}
	if err := f.needRepo(); err != nil {
		return err
	}
	labels := labelNames(pr.Labels)
	f.PR = &PRFact{
		Number: pr.Number, Action: f.Action, State: pr.State,
		Draft: pr.Draft, Merged: pr.Merged,
		Head: pr.Head.SHA, Base: pr.Base.Ref,
		Author: pr.User.Login, Title: pr.Title, Labels: labels,
		ClosedAt: pr.ClosedAt.Time, UpdatedAt: pr.UpdatedAt.Time,
	}
	if f.Action == "opened" || f.Action == "edited" {
		f.PR.Trailer = trailer(pr.Body)
	}
	f.Type = "github.pull_request." + f.Action
	f.Subject = event.PRSubject(f.Repo, pr.Number)
	f.Time = pr.UpdatedAt.Time

	verb := strings.ReplaceAll(f.Action, "_", " ")
	d := prData{
		Repo: f.Repo, Number: pr.Number, Action: f.Action, Title: pr.Title,
		URL: pr.HTMLURL, Author: pr.User.Login, Head: pr.Head.SHA, Base: pr.Base.Ref,
		State: pr.State, Draft: pr.Draft, Merged: pr.Merged, Labels: labels,
	}
	switch f.Action {
	case "closed":
		if pr.ClosedAt.IsZero() {
			return f.missing("pull_request.closed_at")
		}
		f.ID = fmt.Sprintf("pr/%d/closed/%s", pr.Number, pr.ClosedAt.Format(time.RFC3339))
		f.Time = pr.ClosedAt.Time
		f.Terminal = true
		if pr.Merged {
			verb = "merged"
		}
	case "synchronize":
		d.Before = p.Before
		verb = "updated to " + short(pr.Head.SHA)
	case "ready_for_review":
		verb = "marked ready for review"
	case "labeled":
		if p.Label != nil {
			d.Label = p.Label.Name
			verb = "labeled " + strconv.Quote(oneLine(p.Label.Name))
		}
	case "dequeued":
		d.Reason = p.Reason
		verb = "removed from the merge queue"
	}
	f.Summary = fmt.Sprintf("PR #%d %s: %s (%s)", pr.Number, verb, oneLine(pr.Title), f.Repo)
	return f.setData(d)
}

type prData struct {
	Repo   string   `json:"repo"`
	Number int      `json:"number"`
	Action string   `json:"action"`
	Title  string   `json:"title"`
	URL    string   `json:"url"`
	Author string   `json:"author"`
	Head   string   `json:"head"`
	Base   string   `json:"base"`
	State  string   `json:"state"`
	Draft  bool     `json:"draft"`
	Merged bool     `json:"merged"`
	Labels []string `json:"labels"`
	Label  string   `json:"label,omitempty"`  // labeled: the label added
	Before string   `json:"before,omitempty"` // synchronize: the previous head
	Reason string   `json:"reason,omitempty"` // dequeued: why the merge queue dropped it
}

func (f *Fact) checkRun(body []byte, pre any) error {
	var completed bool
	switch f.Action {
	case "completed":
		completed = true
	case "created", "rerequested":
	default:
		return f.ignoreAction()
	}
	p, err := payloadAs[checkRunPayload](f, body, pre)
	if err != nil {
		return err
	}
	r := p.CheckRun
	switch {
	case r == nil:
		return f.missing("check_run")
	case r.HeadSHA == "":
		return f.missing("check_run.head_sha")
	case r.Name == "":
		return f.missing("check_run.name")
	case completed && r.Conclusion == "":
		return f.missing("check_run.conclusion")
	}
	at := r.CompletedAt.Time
	if at.IsZero() {
		at = r.StartedAt.Time
	}
	result := ResultPending
	if completed {
		result = conclusionResult(r.Conclusion)
		f.Type = event.TypeGitHubCheckRunCompleted
	}
	return f.check(CheckFact{SHA: r.HeadSHA, Name: r.Name, Result: result, At: at, PRs: prNumbers(r.PullRequests)},
		checkData{App: appName(r.App), Status: r.Status, Conclusion: r.Conclusion, URL: r.HTMLURL},
		fmt.Sprintf("check %q", oneLine(r.Name)))
}

func (f *Fact) checkSuite(body []byte, pre any) error {
	var completed bool
	switch f.Action {
	case "completed":
		completed = true
	case "requested", "rerequested":
	default:
		return f.ignoreAction()
	}
	p, err := payloadAs[checkSuitePayload](f, body, pre)
	if err != nil {
		return err
	}
	s := p.CheckSuite
	switch {
	case s == nil:
		return f.missing("check_suite")
	case s.ID == 0:
		return f.missing("check_suite.id")
	case s.HeadSHA == "":
		return f.missing("check_suite.head_sha")
	case completed && s.Conclusion == "":
		return f.missing("check_suite.conclusion")
	}
	result := ResultPending
	if completed {
		result = conclusionResult(s.Conclusion)
		f.Type = event.TypeGitHubCheckSuiteCompleted
	}
	name := "suite:" + strconv.FormatInt(s.ID, 10)
	label := appName(s.App)
	if label == "" {
		label = name
	}
	return f.check(CheckFact{SHA: s.HeadSHA, Name: name, Suite: true, Result: result, At: s.UpdatedAt.Time, PRs: prNumbers(s.PullRequests)},
		checkData{App: appName(s.App), Status: s.Status, Conclusion: s.Conclusion},
		fmt.Sprintf("check suite %q", oneLine(label)))
}

func (f *Fact) status(body []byte, pre any) error {
	p, err := payloadAs[statusPayload](f, body, pre)
	if err != nil {
		return err
	}
	switch {
	case p.SHA == "":
		return f.missing("sha")
	case p.Context == "":
		return f.missing("context")
	case p.State == "":
		return f.missing("state")
	}
	result := ResultFail // error, failure, and anything GitHub may add
	switch p.State {
	case "pending":
		result = ResultPending
	case "success":
		result = ResultPass
	}
	at := p.UpdatedAt.Time
	if at.IsZero() {
		at = p.CreatedAt.Time
	}
	f.Type = event.TypeGitHubStatus
	return f.check(CheckFact{SHA: p.SHA, Name: p.Context, Result: result, At: at},
		checkData{State: p.State, Description: p.Description, URL: p.TargetURL},
		fmt.Sprintf("status %q", oneLine(p.Context)))
}

var resultVerb = map[string]string{ResultPass: "passed", ResultFail: "failed", ResultPending: "is pending"}

// check completes a check_run, check_suite or status fact. f.Type is
// already set, or "" for tracker-only (pending) input.
func (f *Fact) check(c CheckFact, d checkData, what string) error {
	if err := f.needRepo(); err != nil {
		return err
	}
	if c.PRs == nil {
		c.PRs = []int{}
	}
	f.Check = &c
	f.Time = c.At
	d.Repo, d.SHA, d.Name, d.Result, d.PullRequests = f.Repo, c.SHA, c.Name, c.Result, c.PRs
	f.Summary = fmt.Sprintf("%s %s on %s (%s)", what, resultVerb[c.Result], short(c.SHA), f.Repo)
	return f.setData(d)
}

type checkData struct {
	Repo         string `json:"repo"`
	SHA          string `json:"sha"`
	Name         string `json:"name"`
	App          string `json:"app,omitempty"`
	Status       string `json:"status,omitempty"`     // check run / suite: queued, in_progress, completed
	Conclusion   string `json:"conclusion,omitempty"` // check run / suite
	State        string `json:"state,omitempty"`      // commit status: pending, success, failure, error
	Result       string `json:"result"`
	Description  string `json:"description,omitempty"`
	URL          string `json:"url,omitempty"`
	PullRequests []int  `json:"pull_requests"`
}

func (f *Fact) review(body []byte, pre any) error {
	switch f.Action {
	case "submitted", "dismissed":
	default:
		return f.ignoreAction()
	}
	p, err := payloadAs[reviewPayload](f, body, pre)
	if err != nil {
		return err
	}
	r, pr := p.Review, p.PullRequest
	switch {
	case r == nil:
		return f.missing("review")
	case r.User.Login == "":
		return f.missing("review.user.login")
	case r.State == "" && f.Action == "submitted":
		return f.missing("review.state")
	case pr == nil || pr.Number <= 0:
		return f.missing("pull_request.number")
	}
	if err := f.needRepo(); err != nil {
		return err
	}
	state := strings.ToLower(r.State)
	at := r.SubmittedAt.Time
	if f.Action == "dismissed" {
		// A dismissal carries no time of its own: it is no earlier than the
		// review it dismisses, nor than the PR's last update.
		state = "dismissed"
		if pr.UpdatedAt.After(at) {
			at = pr.UpdatedAt.Time
		}
	}
	f.Type = "github.pull_request_review." + f.Action
	f.Subject = event.PRSubject(f.Repo, pr.Number)
	f.Time = at
	f.Review = &ReviewFact{Number: pr.Number, Reviewer: r.User.Login, State: state, At: at, CommitID: r.CommitID}

	who, what := oneLine(r.User.Login), "PR #"+strconv.Itoa(pr.Number)
	switch state {
	case "approved":
		what = who + " approved " + what
	case "changes_requested":
		what = who + " requested changes on " + what
	case "commented":
		what = who + " commented on " + what
	case "dismissed":
		what = "review by " + who + " dismissed on " + what
	default:
		what = who + " reviewed " + what + " (" + oneLine(state) + ")"
	}
	f.Summary = fmt.Sprintf("%s: %s (%s)", what, oneLine(pr.Title), f.Repo)
	return f.setData(reviewData{
		Repo: f.Repo, Number: pr.Number, Title: pr.Title, URL: r.HTMLURL,
		Reviewer: r.User.Login, State: state, CommitID: r.CommitID,
	})
}

type reviewData struct {
	Repo     string `json:"repo"`
	Number   int    `json:"number"`
	Title    string `json:"title"`
	URL      string `json:"url"`
	Reviewer string `json:"reviewer"`
	State    string `json:"state"` // read by event.DefaultPriority
	CommitID string `json:"commit_id"`
}

// maxCommentBody bounds the comment text carried in Data.
const maxCommentBody = 1000

func (f *Fact) issueComment(body []byte, pre any) error {
	if f.Action != "created" {
		return f.ignoreAction()
	}
	p, err := payloadAs[issueCommentPayload](f, body, pre)
	if err != nil {
		return err
	}
	switch {
	case p.Issue == nil || p.Issue.Number <= 0:
		return f.missing("issue.number")
	case p.Comment == nil:
		return f.missing("comment")
	}
	if err := f.needRepo(); err != nil {
		return err
	}
	is, c := p.Issue, p.Comment
	f.Type = event.TypeGitHubIssueCommentCreated
	f.Subject = event.PRSubject(f.Repo, is.Number) // issues and PRs share one number space
	f.Time = c.CreatedAt.Time
	kind := "issue"
	if is.PullRequest != nil {
		kind = "PR"
	}
	f.Summary = fmt.Sprintf("%s commented on %s #%d: %s (%s)", oneLine(c.User.Login), kind, is.Number, oneLine(is.Title), f.Repo)
	return f.setData(commentData{
		Repo: f.Repo, Number: is.Number, Title: is.Title, URL: c.HTMLURL,
		Author: c.User.Login, PullRequest: is.PullRequest != nil, Body: truncate(c.Body, maxCommentBody),
	})
}

type commentData struct {
	Repo        string `json:"repo"`
	Number      int    `json:"number"`
	Title       string `json:"title"`
	URL         string `json:"url"`
	Author      string `json:"author"`
	PullRequest bool   `json:"pull_request"` // the comment is on a PR, not an issue
	Body        string `json:"body"`         // at most maxCommentBody bytes
}

func (f *Fact) deploymentStatus(body []byte, pre any) error {
	p, err := payloadAs[deploymentStatusPayload](f, body, pre)
	if err != nil {
		return err
	}
	s, d := p.DeploymentStatus, p.Deployment
	switch {
	case s == nil || s.State == "":
		return f.missing("deployment_status.state")
	case d == nil || d.ID == 0:
		return f.missing("deployment.id")
	case d.SHA == "":
		return f.missing("deployment.sha")
	}
	if err := f.needRepo(); err != nil {
		return err
	}
	env := s.Environment
	if env == "" {
		env = d.Environment
	}
	url := s.LogURL
	if url == "" {
		url = s.TargetURL
	}
	f.Type = event.TypeGitHubDeploymentStatus
	f.Subject = event.ShaSubject(f.Repo, d.SHA)
	f.CoalesceKey = fmt.Sprintf("github:%s/deployment/%d", f.Repo, d.ID)
	f.Time = s.UpdatedAt.Time
	if f.Time.IsZero() {
		f.Time = s.CreatedAt.Time
	}
	f.Summary = fmt.Sprintf("deployment to %s: %s on %s (%s)", oneLine(env), oneLine(s.State), short(d.SHA), f.Repo)
	return f.setData(deployData{
		Repo: f.Repo, SHA: d.SHA, Ref: d.Ref, Environment: env, DeploymentID: d.ID,
		State: s.State, Description: s.Description, URL: url, Creator: s.Creator.Login,
	})
}

type deployData struct {
	Repo         string `json:"repo"`
	SHA          string `json:"sha"`
	Ref          string `json:"ref"`
	Environment  string `json:"environment"`
	DeploymentID int64  `json:"deployment_id"`
	State        string `json:"state"` // read by event.DefaultPriority
	Description  string `json:"description,omitempty"`
	URL          string `json:"url,omitempty"`
	Creator      string `json:"creator,omitempty"`
}

func (f *Fact) installation(body []byte, pre any) error {
	typ := "github.installation." + f.Action
	if !event.ValidType(typ) {
		return f.ignoreAction()
	}
	p, err := payloadAs[installationPayload](f, body, pre)
	if err != nil {
		return err
	}
	in := p.Installation
	if in == nil || in.ID <= 0 {
		return f.missing("installation.id")
	}
	f.Repo = ""
	f.Type = typ
	f.Subject = "github:installation/" + strconv.FormatInt(in.ID, 10)
	switch f.Action {
	case "created":
		f.Time = in.CreatedAt.Time
	case "suspend":
		f.Time = in.SuspendedAt.Time
	}
	repos := []string{}
	for _, r := range p.Repositories {
		if r.FullName != "" {
			repos = append(repos, r.FullName)
		}
	}
	verb := strings.ReplaceAll(f.Action, "_", " ")
	if f.Action == "suspend" || f.Action == "unsuspend" {
		verb += "ed"
	}
	f.Summary = fmt.Sprintf("installation %d (%s): %s", in.ID, oneLine(in.Account.Login), verb)
	return f.setData(installData{
		InstallationID: in.ID, Action: f.Action, Account: in.Account.Login,
		TargetType: in.TargetType, AppID: in.AppID, Repositories: repos,
	})
}

type installData struct {
	InstallationID int64    `json:"installation_id"`
	Action         string   `json:"action"`
	Account        string   `json:"account"`
	TargetType     string   `json:"target_type,omitempty"`
	AppID          int64    `json:"app_id,omitempty"`
	Repositories   []string `json:"repositories"`
}

// decode unmarshals the payload into v.
func (f *Fact) decode(body []byte, v any) error {
	if err := unmarshal(body, v); err != nil {
		return malformed(f.Event, err)
	}
	return nil
}

func (f *Fact) ignoreAction() error {
	f.Ignored = "action not mapped: " + f.Event + "." + f.Action
	return nil
}

func (f *Fact) needRepo() error {
	if !validRepo(f.Repo) {
		return fmt.Errorf("%w: %s.%s: repository.full_name %q is not owner/name", ErrMalformed, f.Event, f.Action, f.Repo)
	}
	return nil
}

func (f *Fact) missing(field string) error {
	return fmt.Errorf("%w: %s.%s: missing %s", ErrMalformed, f.Event, f.Action, field)
}

func (f *Fact) setData(v any) error {
	if d, ok := v.(prData); ok {
		f.Data = d.appendJSON(make([]byte, 0, d.sizeHint()))
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("github: encode data of %s: %w", f.Event, err)
	}
	f.Data = b
	return nil
}

func malformed(eventType string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrMalformed, eventType, err)
}

// conclusionResult maps a completed check's conclusion: success, neutral
// and skipped pass; every other conclusion fails.
func conclusionResult(c string) string {
	switch c {
	case "success", "neutral", "skipped":
		return ResultPass
	}
	return ResultFail
}

func labelNames(ls []label) []string {
	names := []string{}
	for _, l := range ls {
		if l.Name != "" {
			names = append(names, l.Name)
		}
	}
	return names
}

func prNumbers(rs []prRef) []int {
	ns := []int{}
	for _, r := range rs {
		if r.Number > 0 {
			ns = append(ns, r.Number)
		}
	}
	return ns
}

func appName(a app) string {
	if a.Slug != "" {
		return a.Slug
	}
	return a.Name
}

// short abbreviates a commit sha the way GitHub shows it.
func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

// oneLine makes payload text safe for a one-line summary: control and line
// separator characters become spaces and runs of spaces collapse.
func oneLine(s string) string {
	if plainLine(s) {
		return s // what the rest would return, without its copies
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// plainLine reports whether oneLine has nothing to change in s: printable
// ASCII whose spaces are single and neither lead nor trail (titles,
// logins, check names mostly are).
func plainLine(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < ' ' || c > '~':
			return false
		case c == ' ' && (i == 0 || i == len(s)-1 || s[i-1] == ' '):
			return false
		}
	}
	return true
}

// truncate cuts s to at most n bytes without splitting a rune.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
