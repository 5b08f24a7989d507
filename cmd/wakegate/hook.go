package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wakegate/wakegate/providers/agent/client"
	"github.com/wakegate/wakegate/providers/event"
)

// hookBudget bounds everything a hook does after it starts — reading its
// input, every call to the gateway — so the harness has its answer within
// 2 s even when the gateway hangs (it fails open).
const hookBudget = 1500 * time.Millisecond

// stdinBudget bounds reading the harness's JSON: a harness writes it and
// closes stdin at once; an open stdin with nothing on it is not waited on.
const stdinBudget = 400 * time.Millisecond

// maxContext bounds the additional context a hook prints (Claude Code
// truncates long context to a preview).
const maxContext = 8000

const hookHelp = `Usage: wakegate hook <harness-event> [flags]

What a harness hook runs at a turn boundary. It reports the session's
lifecycle to wakegate and hands the model what waits for it, and it never
blocks the harness: with the gateway unreachable, hanging, failing or
refusing the token it exits 0 within 2 s with one line on stderr and
nothing on stdout.

Harness events (Claude Code's hook names work too):
  session-start   SessionStart: session.spawned (source startup) or
                  session.resumed (resume, clear, compact); after a resume or
                  a compaction it prints the brief as additional context
  prompt          UserPromptSubmit: session.turn_started and session.prompted,
                  presence attended; prints the pending inbox entries once as
                  additional context and acks them. Provenance: --source (the
                  harness's marker) or $WAKEGATE_PROMPT_SOURCE; else the sender
                  of a wakegate message the prompt carries ("wakegate message
                  <id> from <party>", as wakegate inbox and wait print it);
                  else human:<channel>. A prompt that is exactly "quiet" sets
                  quiet for the session, "quiet off" lifts it and shows its
                  digest: either is blocked from the model
  stop            Stop: session.turn_ended, data.idle true when no attention+
                  entry waits unacked in the session's inbox. When some do, it
                  blocks ({"decision":"block"}) naming each, one line each, and
                  acks them — never when stop_hook_active is true, never when
                  the gateway cannot be reached; --no-block or
                  WAKEGATE_STOP_BLOCK=off turns blocking off
  notification    Notification: session.permission_requested (a permission
                  prompt) or session.awaiting_input (idle, elicitation)
  pr-opened REPO NUMBER
                  session.pr_opened: links org/repo#NUMBER to the session
  post-tool-use   PostToolUse (matcher Bash): session.pr_opened for the PR a
                  Bash call created (gh pr create, hub pull-request, an API
                  call, or a PR URL alone on a line of its output); any other
                  call sends nothing. The id names the PR: a re-run is a
                  duplicate

It reads the harness's hook JSON on stdin when there is one (session_id,
hook_event_name, prompt, source, message, notification_type,
stop_hook_active, tool_name, tool_input, tool_response). Output is
Claude Code's {"hookSpecificOutput": {"hookEventName", "additionalContext"}},
or the bare text with --format text.

Event ids are hook/<session>/<event>/<n>: n is --stamp (a harness timestamp
or counter) when given, else a per-session, per-event counter kept in
$WAKEGATE_STATE_DIR (default the user cache dir), advanced once the gateway
may have the event — so a hook re-run after a failure sends the same ids and
the gateway keeps one.

Environment:
  WAKEGATE_URL      the gateway (default ` + defaultURL + `)
  WAKEGATE_TOKEN    the session's token (a child token: wakegate token, or
                    POST /v1/sessions/{id}/token)
  WAKEGATE_SESSION  the session (default: the token's own session:<id>)
  WAKEGATE_CHANNEL  the person's channel for prompt provenance (default terminal)
  WAKEGATE_PARENT, WAKEGATE_LABELS   session-start startup: data.parent, data.labels
  WAKEGATE_HOOK_STAMP   same as --stamp
  WAKEGATE_STATE_DIR    where the id counters live

Exit code: always 0 (a harness reads a non-zero exit as "block").

Flags:`

// hookInput is what a harness writes on a hook's stdin: Claude Code's
// fields; other harnesses may send none of them.
type hookInput struct {
	SessionID        string `json:"session_id"`
	TranscriptPath   string `json:"transcript_path"`
	Cwd              string `json:"cwd"`
	HookEventName    string `json:"hook_event_name"`
	Prompt           string `json:"prompt"`
	Source           string `json:"source"` // SessionStart: startup | resume | clear | compact
	Message          string `json:"message"`
	Title            string `json:"title"`
	NotificationType string `json:"notification_type"` // permission_prompt | idle_prompt | …
	StopHookActive   bool   `json:"stop_hook_active"`  // Stop: the turn already goes on because a stop hook blocked
	// PostToolUse: the tool, what it was asked (Bash: command) and what it
	// answered (Bash: stdout, stderr).
	ToolName     string          `json:"tool_name"`
	ToolInput    json.RawMessage `json:"tool_input"`
	ToolResponse json.RawMessage `json:"tool_response"`
}

// hookDecision is Claude Code's answer that blocks: a Stop hook's keeps
// the turn going with reason as the model's next instruction; a
// UserPromptSubmit hook's keeps the prompt from the model and shows reason
// to the person.
type hookDecision struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
}

// hookOutput is Claude Code's hook answer that adds context for the model.
type hookOutput struct {
	HookSpecificOutput struct {
		HookEventName     string `json:"hookEventName"`
		AdditionalContext string `json:"additionalContext"`
	} `json:"hookSpecificOutput"`
}

// hookNames maps what a harness may call a hook to wakegate's name.
var hookNames = map[string]string{
	"session-start": "session-start", "sessionstart": "session-start",
	"prompt": "prompt", "userpromptsubmit": "prompt",
	"stop":          "stop",
	"notification":  "notification",
	"pr-opened":     "pr-opened",
	"post-tool-use": "post-tool-use", "posttooluse": "post-tool-use",
}

// claudeEventNames are the hookEventName of the output, per hook.
var claudeEventNames = map[string]string{"session-start": "SessionStart", "prompt": "UserPromptSubmit"}

var stampRe = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// runHook is `wakegate hook <harness-event>`. It always returns 0, with
// at most one line on stderr, and prints to stdout only the context it
// hands the model.
func runHook(args []string, stdin io.Reader, getenv func(string) string, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(context.Background(), hookBudget)
	defer cancel()
	h := &hook{getenv: getenv}
	name := "hook"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name = "hook " + args[0]
	}
	out, err := h.run(ctx, args, stdin, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if h.block != "" {
		if h.format == "text" {
			fmt.Fprintln(stdout, h.block)
		} else {
			b, _ := json.Marshal(hookDecision{Decision: "block", Reason: h.block})
			fmt.Fprintf(stdout, "%s\n", b)
		}
	} else if out != "" {
		if h.format == "text" {
			fmt.Fprintln(stdout, out)
		} else {
			var o hookOutput
			o.HookSpecificOutput.HookEventName = claudeEventNames[h.name]
			o.HookSpecificOutput.AdditionalContext = out
			b, _ := json.Marshal(o)
			fmt.Fprintf(stdout, "%s\n", b)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "wakegate %s: %s (the harness goes on)\n", name, oneLine(err.Error()))
	}
	return 0
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

type hook struct {
	getenv  func(string) string
	name    string
	format  string
	in      hookInput
	cl      *client.Client
	session string // bare id
	own     bool   // the token is the session's own: its inbox and presence are the session's
	idBase  string
	counter *hookCounter
	// block, when set, is the reason of a {"decision": "block"} answer:
	// stop keeps the turn going over unacked entries, prompt keeps a
	// "quiet" from the model.
	block string

	mu   sync.Mutex
	errs []string
}

// fail records a failure; every failure of a run is reported on one line.
func (h *hook) fail(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.errs = append(h.errs, fmt.Sprintf(format, args...))
}

func (h *hook) failed() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(h.errs, "; "))
}

func (h *hook) run(ctx context.Context, args []string, stdin io.Reader, stderr io.Writer) (string, error) {
	fs := flag.NewFlagSet("wakegate hook", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	url := fs.String("url", "", "the gateway (default $WAKEGATE_URL, else "+defaultURL+")")
	token := fs.String("token", "", "the session's token (default $WAKEGATE_TOKEN)")
	session := fs.String("session", "", "the session (default $WAKEGATE_SESSION, else the token's session)")
	channel := fs.String("channel", "", "prompt: the person's channel, provenance human:<channel> (default $WAKEGATE_CHANNEL, else terminal)")
	source := fs.String("source", "", "prompt: the provenance itself (human:<channel>, session:<id>, external:<client>); wins over --channel")
	stamp := fs.String("stamp", "", "the harness's timestamp or counter for the event ids (default $WAKEGATE_HOOK_STAMP, else a counter)")
	fs.StringVar(&h.format, "format", "claude", "output: claude (hookSpecificOutput JSON) or text")
	parent := fs.String("parent", "", "session-start: the parent session (default $WAKEGATE_PARENT)")
	labels := fs.String("labels", "", "session-start: comma-separated labels (default $WAKEGATE_LABELS)")
	noBlock := fs.Bool("no-block", false, "stop: never block the turn's end (default $WAKEGATE_STOP_BLOCK=off)")
	var pos []string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprintln(stderr, hookHelp)
				fs.SetOutput(stderr)
				fs.PrintDefaults()
				return "", err
			}
			return "", err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(pos) == 0 {
		return "", errors.New("name the harness event: session-start, prompt, stop, notification, post-tool-use or pr-opened (wakegate hook --help)")
	}
	h.name = hookNames[strings.ToLower(pos[0])]
	if h.name == "" {
		return "", fmt.Errorf("unknown harness event %q: want session-start, prompt, stop, notification, post-tool-use or pr-opened", pos[0])
	}
	if h.format != "claude" && h.format != "text" {
		return "", fmt.Errorf("--format %q: want claude or text", h.format)
	}
	if h.name != "pr-opened" && len(pos) > 1 {
		return "", fmt.Errorf("unexpected argument %q", pos[1])
	}
	h.readInput(ctx, stdin)

	tok := firstOf(*token, h.getenv("WAKEGATE_TOKEN"))
	if tok == "" {
		return "", errors.New("WAKEGATE_TOKEN is not set; nothing sent")
	}
	sub := tokenSubject(tok)
	h.session = strings.TrimPrefix(firstOf(*session, h.getenv("WAKEGATE_SESSION")), "session:")
	if h.session == "" {
		h.session = strings.TrimPrefix(sub, "session:")
		if h.session == sub {
			return "", fmt.Errorf("no session: set WAKEGATE_SESSION (the token speaks for %q, not a session)", sub)
		}
	}
	if !event.ValidID(h.session) {
		return "", fmt.Errorf("session %q is not a session id (^[A-Za-z0-9._-]{1,128}$)", h.session)
	}
	h.own = sub == "session:"+h.session
	cl, err := client.New(firstOf(*url, h.getenv("WAKEGATE_URL"), defaultURL), tok,
		client.WithRetries(0), client.WithTimeout(hookBudget), client.WithUserAgent("wakegate-hook/1"))
	if err != nil {
		return "", err
	}
	h.cl = cl

	st := firstOf(*stamp, h.getenv("WAKEGATE_HOOK_STAMP"))
	if st != "" && !stampRe.MatchString(st) {
		return "", fmt.Errorf("--stamp %q: want 1–64 of A-Z a-z 0-9 . _ : -", st)
	}
	if st == "" {
		h.counter = openCounter(h.getenv, h.session, h.name)
		st = h.counter.next()
	}
	h.idBase = "hook/" + h.session + "/" + h.name + "/" + st

	var out string
	switch h.name {
	case "session-start":
		out = h.sessionStart(ctx, firstOf(*parent, h.getenv("WAKEGATE_PARENT")), firstOf(*labels, h.getenv("WAKEGATE_LABELS")))
	case "prompt":
		prov := firstOf(*source, h.getenv("WAKEGATE_PROMPT_SOURCE"))
		if prov != "" {
			if _, err := event.ParseParty(prov); err != nil && !strings.HasPrefix(prov, "external:") {
				return "", fmt.Errorf("provenance %q: want human:<channel>, session:<id> or external:<client>", prov)
			}
		}
		human := "human:" + firstOf(*channel, h.getenv("WAKEGATE_CHANNEL"), "terminal")
		if _, err := event.ParseParty(human); err != nil {
			return "", fmt.Errorf("channel: %w", err)
		}
		switch strings.TrimSpace(h.in.Prompt) {
		case "quiet":
			h.quiet(ctx, true, human)
		case "quiet off":
			h.quiet(ctx, false, human)
		default:
			out = h.prompt(ctx, prov, human)
		}
	case "stop":
		block := !*noBlock
		switch strings.ToLower(h.getenv("WAKEGATE_STOP_BLOCK")) {
		case "off", "false", "0", "no":
			block = false
		}
		h.stop(ctx, block)
	case "notification":
		h.notification(ctx)
	case "post-tool-use":
		h.postToolUse(ctx)
	case "pr-opened":
		if len(pos) != 3 {
			return "", errors.New("want: wakegate hook pr-opened <org/repo> <number>")
		}
		n, err := strconv.Atoi(strings.TrimPrefix(pos[2], "#"))
		if err != nil || n <= 0 || strings.Count(pos[1], "/") != 1 {
			return "", fmt.Errorf("pr-opened %s %s: want <org/repo> <number>", pos[1], pos[2])
		}
		h.push(ctx, h.event(event.TypeSessionPrOpened, "", fmt.Sprintf("opened %s#%d", pos[1], n),
			map[string]any{"repo": pos[1], "number": n}))
	}
	return out, h.failed()
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// readInput reads the harness's JSON from stdin, when stdin is not a
// terminal, within stdinBudget. Input that is not JSON is ignored: the
// hook still reports what its name says.
func (h *hook) readInput(ctx context.Context, stdin io.Reader) {
	if stdin == nil {
		return
	}
	if f, ok := stdin.(*os.File); ok && isTerminal(f) {
		return
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(stdin, 1<<20))
		got <- b
	}()
	t := time.NewTimer(stdinBudget)
	defer t.Stop()
	select {
	case b := <-got:
		_ = json.Unmarshal(b, &h.in)
	case <-t.C:
	case <-ctx.Done():
	}
}

// tokenSubject reads a JWT's sub without verifying it (the gateway does):
// it tells which session the token speaks for.
func tokenSubject(tok string) string {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c struct {
		Sub string `json:"sub"`
	}
	_ = json.Unmarshal(b, &c)
	return c.Sub
}

// event builds one of the hook's events: id from the hook's base (plus a
// suffix when a hook sends several), about the session.
func (h *hook) event(typ, suffix, summary string, data map[string]any) *event.Event {
	e := &event.Event{ID: h.idBase + suffix, Type: typ, Summary: summary}
	if !h.own {
		e.Subject = event.SessionSubject(h.session)
	}
	if h.in.SessionID != "" && data != nil {
		data["harness_session_id"] = h.in.SessionID
	}
	if data != nil {
		e.Data, _ = json.Marshal(data)
	}
	return e
}

// push commits the hook's events in one batch, and advances the id
// counter unless the gateway certainly did not commit them.
func (h *hook) push(ctx context.Context, events ...*event.Event) {
	_, err := h.cl.PushBatch(ctx, events)
	if h.counter != nil && !notCommitted(err) {
		h.counter.advance()
	}
	if err != nil {
		h.fail("push %s: %s", events[0].Type, describe(err))
	}
}

// notCommitted: the gateway refused the push (4xx), or it was never
// reached (nothing listens, no such host). A timeout or a 5xx may have
// committed it.
func notCommitted(err error) bool {
	if err == nil {
		return false
	}
	if s := client.StatusOf(err); s >= 400 && s < 500 {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

func (h *hook) sessionStart(ctx context.Context, parent, labels string) string {
	src := firstOf(h.in.Source, "startup")
	if src == "startup" {
		data := map[string]any{}
		if parent != "" {
			data["parent"] = strings.TrimPrefix(parent, "session:")
		}
		if l := splitList(labels); len(l) > 0 {
			data["labels"] = l
		}
		if h.in.Cwd != "" {
			data["cwd"] = h.in.Cwd
		}
		h.push(ctx, h.event(event.TypeSessionSpawned, "", "session started", data))
		return ""
	}
	var wg sync.WaitGroup
	var brief *client.Brief
	if (src == "resume" || src == "compact") && h.own {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := h.cl.Brief(ctx)
			if err != nil {
				h.fail("brief: %s", describe(err))
				return
			}
			brief = b
		}()
	}
	h.push(ctx, h.event(event.TypeSessionResumed, "", "session resumed ("+src+")", map[string]any{"source": src}))
	wg.Wait()
	if brief == nil {
		return ""
	}
	var b strings.Builder
	reason := map[string]string{"resume": "resumed", "compact": "compacted"}[src]
	fmt.Fprintf(&b, "This session was %s. What wakegate holds for it, from state (not from a summary):\n", reason)
	writeBrief(&b, brief, time.Now())
	b.WriteString("Read and acknowledge entries with `wakegate inbox` / `wakegate inbox --ack-through SEQ`.")
	return capText(b.String())
}

// prompt reports a turn started by a prompt and hands the model what
// waits in the session's inbox. Its provenance (docs/design.md §12) is the
// harness's marker (--source) when given; else the sender of the wakegate
// message the prompt carries (its marker "wakegate message <id>", whose
// entry in the session's inbox names the sender, or "… from <party>");
// else the person at human.
func (h *hook) prompt(ctx context.Context, marker, human string) string {
	var page *client.InboxPage
	if h.own {
		var err error
		if page, err = h.cl.Inbox(ctx, client.InboxQuery{Limit: 1000}); err != nil {
			h.fail("inbox: %s", describe(err))
		}
	}
	provenance := marker
	if provenance == "" {
		provenance = messageSender(h.in.Prompt, page)
	}
	if provenance == "" {
		provenance = human
	}
	var wg sync.WaitGroup
	var notices string
	wg.Add(1)
	go func() {
		defer wg.Done()
		h.push(ctx,
			h.event(event.TypeSessionTurnStarted, "/turn_started", "turn started", map[string]any{}),
			h.event(event.TypeSessionPrompted, "/prompted", "prompted by "+provenance,
				map[string]any{"source": provenance, "prompt_chars": len([]rune(h.in.Prompt))}))
	}()
	if h.own {
		if strings.HasPrefix(provenance, "human:") {
			wg.Add(1)
			go func() { defer wg.Done(); h.attend(ctx) }()
		}
		if page != nil {
			wg.Add(1)
			go func() { defer wg.Done(); notices = h.handOver(ctx, page) }()
		}
	}
	wg.Wait()
	return notices
}

// messageMarkerRe finds a wakegate message in a prompt: "wakegate message
// <id>", optionally "from <party>" (MessageMarker writes it).
var messageMarkerRe = regexp.MustCompile(`wakegate message ([0-9a-f]{32})(?: from ((?:session|human):[A-Za-z0-9._-]{1,128}))?`)

// MessageMarker is the text a harness puts in a prompt it injects for a
// wakegate message, so the prompt hook labels the turn with its sender.
func messageMarker(id, sender string) string {
	return "wakegate message " + id + " from " + sender
}

// messageSender is the sender of the wakegate message a prompt carries:
// from the message's entry in the session's inbox (coalesce key
// message:<sender>:<id>) when it is there, else from the marker's own
// "from"; "" when the prompt carries no marker.
func messageSender(prompt string, page *client.InboxPage) string {
	m := messageMarkerRe.FindStringSubmatch(prompt)
	if m == nil {
		return ""
	}
	if page != nil {
		for _, e := range page.Entries {
			if rest, ok := strings.CutPrefix(e.CoalesceKey, "message:"); ok && strings.HasSuffix(rest, ":"+m[1]) {
				return strings.TrimSuffix(rest, ":"+m[1])
			}
		}
	}
	return m[2]
}

// quiet is a prompt that is exactly "quiet" (on) or "quiet off" (docs/design.md
// §12): it sets or lifts quiet for the session, keeps the prompt from the
// model (a block) and shows the person what it did. The person is there,
// so the session is attended too.
func (h *hook) quiet(ctx context.Context, on bool, human string) {
	scope := "self"
	if !h.own {
		scope = "session:" + h.session
	}
	var wg sync.WaitGroup
	if h.own {
		wg.Add(1)
		go func() { defer wg.Done(); h.attend(ctx) }()
	}
	defer wg.Wait()
	party := "session:" + h.session
	if on {
		if _, err := h.cl.QuietOn(ctx, client.QuietRequest{Scope: scope, Reason: "quiet typed by " + human}); err != nil {
			h.fail("quiet: %s", describe(err))
			h.block = "wakegate: quiet was NOT set for " + party + ": " + describe(err)
			return
		}
		h.block = "wakegate: quiet on for " + party + ": its wakes and pushes are held in its inbox until you type `quiet off` (a worker's own waits still resume). Your prompt did not reach the model."
		return
	}
	lifted, err := h.cl.QuietOff(ctx, scope)
	switch {
	case client.StatusOf(err) == 404:
		h.block = "wakegate: quiet was not on for " + party + "; nothing to lift. Your prompt did not reach the model."
		return
	case err != nil:
		h.fail("quiet off: %s", describe(err))
		h.block = "wakegate: quiet was NOT lifted for " + party + ": " + describe(err)
		return
	}
	var b strings.Builder
	b.WriteString("wakegate: quiet lifted for " + party)
	if len(lifted.Digests) == 0 {
		b.WriteString("; it held nothing.")
	} else {
		b.WriteString(":")
		for _, d := range lifted.Digests {
			b.WriteString("\n" + d.Text)
		}
	}
	b.WriteString("\nYour prompt did not reach the model.")
	h.block = b.String()
}

// attend marks the session attended, keeping a PAUSED hold it has (a PUT
// replaces the whole presence).
func (h *hook) attend(ctx context.Context) {
	req := client.PresenceRequest{Attended: true}
	if p, err := h.cl.GetPresence(ctx); err == nil && p.Paused && p.PausedUntil != nil {
		req.PausedUntil, req.Reason = *p.PausedUntil, p.Reason
	}
	if _, err := h.cl.SetPresence(ctx, req); err != nil {
		h.fail("presence: %s", describe(err))
	}
}

// handOver renders what waits unacked in the session's inbox (page) for
// the model and acks what it rendered, so each is handed over once. When
// the ack fails the text is still handed over (it may come again).
func (h *hook) handOver(ctx context.Context, page *client.InboxPage) string {
	text, through := renderNotices(page.Entries, "session:"+h.session, time.Now())
	if through > 0 {
		if _, err := h.cl.AckThrough(ctx, through); err != nil {
			h.fail("ack: %s", describe(err))
		}
	}
	return text
}

// renderNotices is the context a prompt hook hands the model: each
// attention+ entry on a line, info folds counted on one, within
// maxContext. through is the highest seq rendered (0: none).
func renderNotices(entries []client.Entry, party string, now time.Time) (text string, through int64) {
	if len(entries) == 0 {
		return "", 0
	}
	var lines []string
	var info []string
	infoCount := 0
	size := 0
	for _, e := range entries {
		if e.Priority.Rank() >= event.Attention.Rank() {
			line := "- " + noticeLine(e, now)
			if size+len(line) > maxContext-400 {
				break
			}
			size += len(line) + 1
			lines = append(lines, line)
		} else {
			infoCount += max(e.Count, 1)
			if len(info) < 10 {
				s := e.Subject + " " + e.Type
				if e.Count > 1 {
					s += fmt.Sprintf(" ×%d", e.Count)
				}
				info = append(info, s)
			}
		}
		through = e.Seq
	}
	var b strings.Builder
	n := len(lines)
	fmt.Fprintf(&b, "wakegate: %d %s for %s since your last prompt (now acknowledged):\n", n, plural(n, "notice", "notices"), party)
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	if infoCount > 0 {
		fmt.Fprintf(&b, "+ %d info %s: %s", infoCount, plural(infoCount, "update", "updates"), strings.Join(info, "; "))
		if len(info) == 10 {
			b.WriteString("; …")
		}
		b.WriteString("\n")
	}
	if through < entries[len(entries)-1].Seq {
		b.WriteString("More are waiting: `wakegate inbox` lists them.\n")
	}
	return strings.TrimRight(b.String(), "\n"), through
}

func noticeLine(e client.Entry, now time.Time) string {
	s := fmt.Sprintf("[%s] %s %s", e.Priority, e.Subject, e.Type)
	if e.Summary != "" {
		s += " — " + truncate(e.Summary, 200)
	}
	if e.Count > 1 {
		s += fmt.Sprintf(" (×%d)", e.Count)
	}
	if e.Escalated != nil {
		s += fmt.Sprintf(" (escalated from %s: %s)", e.Escalated.From, e.Escalated.Reason)
	}
	return s + fmt.Sprintf(" (seq %d, %s ago)", e.Seq, age(e.LastAt, now))
}

func capText(s string) string {
	if len(s) <= maxContext {
		return s
	}
	cut := s[:maxContext]
	if i := strings.LastIndexByte(cut, '\n'); i > 0 {
		cut = cut[:i]
	}
	return cut + "\n… (cut; `wakegate brief` prints it whole)"
}

// stop reports the end of a turn: idle when no attention+ entry waits
// unacked in the session's inbox (an inbox it cannot read counts as
// nothing waiting, and is reported). When such entries wait, block is on,
// and the turn does not already go on because of a stop hook
// (stop_hook_active), it does not let the turn end blind (docs/design.md §12): it
// blocks, naming each entry on a line, acks them (handed over once) and
// reports no turn end — the turn goes on.
func (h *hook) stop(ctx context.Context, block bool) {
	var waiting []client.Entry
	if h.own {
		// A third of the budget at most: the turn_ended must still go out
		// when the read hangs.
		ictx, cancel := context.WithTimeout(ctx, hookBudget/3)
		page, err := h.cl.Inbox(ictx, client.InboxQuery{Limit: 1000})
		cancel()
		if err != nil {
			h.fail("inbox: %s", describe(err))
		} else {
			for _, e := range page.Entries {
				if e.Priority.Rank() >= event.Attention.Rank() {
					waiting = append(waiting, e)
				}
			}
		}
	}
	if len(waiting) > 0 && block && !h.in.StopHookActive {
		var named int
		h.block, named = stopReason(waiting, "session:"+h.session, time.Now())
		seqs := make([]int64, named)
		for i, e := range waiting[:named] {
			seqs[i] = e.Seq
		}
		if _, err := h.cl.AckSeqs(ctx, seqs...); err != nil {
			h.fail("ack: %s", describe(err))
		}
		return
	}
	queued := len(waiting)
	idle := queued == 0
	summary := "turn ended; idle"
	if !idle {
		summary = fmt.Sprintf("turn ended; %d %s waiting", queued, plural(queued, "entry", "entries"))
	}
	h.push(ctx, h.event(event.TypeSessionTurnEnded, "", summary, map[string]any{"idle": idle, "queued": queued}))
}

// stopReason is a blocked stop's reason: each waiting entry on a line,
// within maxContext; named is how many it names (the first ones).
func stopReason(waiting []client.Entry, party string, now time.Time) (reason string, named int) {
	var b strings.Builder
	n := len(waiting)
	fmt.Fprintf(&b, "wakegate: %d %s waiting for %s; deal with %s before ending the turn (now acknowledged):", n,
		plural(n, "entry", "entries"), party, plural(n, "it", "them"))
	for i, e := range waiting {
		line := "\n- " + noticeLine(e, now)
		if b.Len()+len(line) > maxContext-100 {
			fmt.Fprintf(&b, "\n… and %d more: `wakegate inbox` lists them.", n-i)
			return b.String(), i
		}
		b.WriteString(line)
	}
	return b.String(), n
}

// notification reports that the session waits on a person: a permission
// prompt, or input. Other notifications (auth_success, …) send nothing.
func (h *hook) notification(ctx context.Context) {
	typ := ""
	switch t := h.in.NotificationType; {
	case t == "permission_prompt":
		typ = event.TypeSessionPermissionRequested
	case t == "idle_prompt" || t == "elicitation_dialog":
		typ = event.TypeSessionAwaitingInput
	case t != "":
		return
	case strings.Contains(strings.ToLower(h.in.Message), "permission"):
		typ = event.TypeSessionPermissionRequested
	default:
		typ = event.TypeSessionAwaitingInput
	}
	summary := firstOf(h.in.Message, map[string]string{
		event.TypeSessionPermissionRequested: "waits for a permission",
		event.TypeSessionAwaitingInput:       "waits for input",
	}[typ])
	data := map[string]any{}
	if h.in.NotificationType != "" {
		data["notification_type"] = h.in.NotificationType
	}
	if h.in.Message != "" {
		data["message"] = truncate(h.in.Message, 500)
	}
	h.push(ctx, h.event(typ, "", truncate(summary, 200), data))
}

// hookCounter numbers a session's hook events of one kind across
// processes, in a small file: the next number is used until the gateway
// may have it, so a hook re-run after a failure reuses its ids.
type hookCounter struct {
	path string
	n    int64
}

func openCounter(getenv func(string) string, session, name string) *hookCounter {
	dir := getenv("WAKEGATE_STATE_DIR")
	if dir == "" {
		if d, err := os.UserCacheDir(); err == nil {
			dir = filepath.Join(d, "wakegate", "hooks")
		} else {
			dir = filepath.Join(os.TempDir(), "wakegate-hooks-"+strconv.Itoa(os.Getuid()))
		}
	}
	sum := sha256.Sum256([]byte(session + "\x00" + name))
	c := &hookCounter{path: filepath.Join(dir, hex.EncodeToString(sum[:10]))}
	if b, err := os.ReadFile(c.path); err == nil {
		c.n, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	} else if !errors.Is(err, os.ErrNotExist) {
		c.path = "" // unusable: number by the clock (a re-run then sends new ids)
	}
	if c.path != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			c.path = ""
		}
	}
	return c
}

// next is the stamp of this run's events.
func (c *hookCounter) next() string {
	if c.path == "" {
		return "t" + strconv.FormatInt(time.Now().UnixNano(), 10)
	}
	return strconv.FormatInt(c.n+1, 10)
}

// advance records that this run's number is used.
func (c *hookCounter) advance() {
	if c.path == "" {
		return
	}
	tmp := fmt.Sprintf("%s.%d.tmp", c.path, os.Getpid())
	if os.WriteFile(tmp, []byte(strconv.FormatInt(c.n+1, 10)+"\n"), 0o600) == nil {
		_ = os.Rename(tmp, c.path)
	}
}
