package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/wakegate/wakegate/providers/event"
)

// The post-tool-use hook (Claude Code's PostToolUse) claims a PR the
// session's Bash call created, so nobody has to remember `wakegate hook
// pr-opened` (docs/design.md §3).

var (
	// prURLRe is a GitHub pull request URL: the repository and the number.
	prURLRe = regexp.MustCompile(`https://github\.com/([A-Za-z0-9._-]{1,100}/[A-Za-z0-9._-]{1,100})/pull/([1-9][0-9]{0,9})\b`)
	// createsPRRe is a command that creates a PR: gh pr create, hub
	// pull-request, or a REST or GraphQL call that does.
	createsPRRe = regexp.MustCompile(`\bgh\s+pr\s+create\b|\bhub\s+pull-request\b|\bgh\s+api\b[^|;&\n]*/pulls\b|createPullRequest`)
	// readsPRRe is a command that shows PRs it did not create: their URLs
	// in its output are no claim.
	readsPRRe = regexp.MustCompile(`\bgh\s+(pr\s+(view|list|status|checks|diff|checkout|comment|review|merge|close|reopen|edit|ready)|search|browse|api)\b|\bgit\s+(log|show)\b`)
)

// maxToolOutput bounds how much of a tool's output is searched for a URL.
const maxToolOutput = 256 << 10

// createdPR returns the PR a Bash call created — the first PR URL in its
// output when the command creates one (gh pr create, hub pull-request, an
// API call), else a PR URL alone on a line of the output (what gh prints,
// run by a script) unless the command only shows PRs — and ok false for
// any other call.
func createdPR(in hookInput) (repo string, number int, ok bool) {
	if in.ToolName != "Bash" {
		return "", 0, false
	}
	var ti struct {
		Command string `json:"command"`
	}
	_ = json.Unmarshal(in.ToolInput, &ti)
	out := toolOutput(in.ToolResponse)
	creates := createsPRRe.MatchString(ti.Command)
	if !creates && readsPRRe.MatchString(ti.Command) {
		return "", 0, false
	}
	var m []string
	if creates {
		m = prURLRe.FindStringSubmatch(out)
	} else {
		for line := range strings.Lines(out) {
			line = strings.TrimSpace(line)
			if sm := prURLRe.FindStringSubmatch(line); sm != nil && sm[0] == line {
				m = sm
				break
			}
		}
	}
	if m == nil {
		return "", 0, false
	}
	n, err := strconv.Atoi(m[2])
	if err != nil || n <= 0 {
		return "", 0, false
	}
	return m[1], n, true
}

// toolOutput is what a tool answered, as text: Bash's stdout and stderr
// (Claude Code sends an object), or the answer itself when it is a string.
func toolOutput(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return capOutput(s)
	}
	var o map[string]any
	if json.Unmarshal(raw, &o) != nil {
		return ""
	}
	var b strings.Builder
	for _, k := range []string{"stdout", "output", "stderr"} {
		if v, ok := o[k].(string); ok {
			b.WriteString(v)
			b.WriteByte('\n')
		}
	}
	return capOutput(b.String())
}

func capOutput(s string) string {
	if len(s) > maxToolOutput {
		return s[:maxToolOutput]
	}
	return s
}

// postToolUse journals session.pr_opened for the PR a Bash call created,
// and nothing for any other call. Its id names the PR, so running it again
// for the same PR is a duplicate the gateway keeps once.
func (h *hook) postToolUse(ctx context.Context) {
	repo, n, ok := createdPR(h.in)
	if !ok {
		return
	}
	h.counter = nil // the id is the fact's own
	h.idBase = "hook/" + h.session + "/pr-opened/" + repo + "#" + strconv.Itoa(n)
	h.push(ctx, h.event(event.TypeSessionPrOpened, "", fmt.Sprintf("opened %s#%d", repo, n),
		map[string]any{"repo": repo, "number": n, "via": "post-tool-use"}))
}
