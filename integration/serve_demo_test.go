package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeDemoWakesTheOperator is a newcomer's first run: `serve` with no
// secrets and no Redis, its stdout not a terminal, writes the generated
// secrets and the demo's lines to a 0600 file; pasting those lines in
// order (the exports and the curl commands) leaves exactly one entry, a
// wake about the demo session, in the operator's inbox, reached as the
// default workspace's fallback — and journals no undeliverable fault.
func TestServeDemoWakesTheOperator(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("the demo's lines are shell: %v", err)
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatalf("the demo's lines run curl: %v", err)
	}
	secrets := filepath.Join(t.TempDir(), "secrets.txt")
	s := &stack{t: t, prefix: "wg", env: map[string]string{
		"WAKEGATE_SECRETS_FILE": secrets,
		"WAKEGATE_LOG_LEVEL":    "info",
	}}
	p := s.start("serve", "serve", nil)
	c := s.client(p)

	st, err := os.Stat(secrets)
	if err != nil {
		t.Fatalf("serve wrote no secrets file: %v\n%s", err, p.logs.tail(20))
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("secrets file mode %v, want 0600", st.Mode().Perm())
	}
	if !strings.Contains(p.logs.String(), secrets) {
		t.Errorf("the log does not name the secrets file %s", secrets)
	}
	if !strings.Contains(p.logs.String(), `"fallback":"human:operator"`) {
		t.Errorf("no log line says the operator is the fallback:\n%s", p.logs.tail(20))
	}
	raw, err := os.ReadFile(secrets)
	if err != nil {
		t.Fatal(err)
	}

	// The lines a newcomer pastes: every export and curl command, with
	// their continuation lines, in the order printed.
	var script []string
	var opToken string
	cont := false
	for _, line := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimSpace(line)
		if cont || strings.HasPrefix(trimmed, "export ") || strings.HasPrefix(trimmed, "curl ") {
			script = append(script, trimmed)
			cont = strings.HasSuffix(trimmed, `\`)
		}
		if v, ok := strings.CutPrefix(trimmed, "export WAKEGATE_TOKEN="); ok {
			opToken = v
		}
	}
	if opToken == "" || len(script) < 4 {
		t.Fatalf("the secrets file has no operator token or demo lines:\n%s", raw)
	}
	cmd := exec.Command(bash, "-euo", "pipefail", "-c", strings.Join(script, "\n"))
	cmd.Env = processEnv(nil)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the demo's lines failed: %v\n%s", err, out)
	}
	t.Logf("the demo's lines answered: %s", out)

	var page inboxPage
	waitFor(t, 10*time.Second, "the demo's wake in the operator's inbox", func() (bool, string) {
		page = c.inbox(t, opToken, "")
		return len(page.Entries) > 0, string(mustJSON(t, page))
	})
	if len(page.Entries) != 1 {
		t.Fatalf("operator's inbox has %d entries, want 1: %s", len(page.Entries), mustJSON(t, page))
	}
	e := page.Entries[0]
	if e.Type != "session.turn_ended" || e.Subject != "session:demo" || !e.Wake || e.Via != "fallback" {
		t.Errorf("operator's entry %s, want a wake about session:demo's turn_ended via fallback", mustJSON(t, e))
	}

	r := c.get(t, "/v1/events?limit=1000", opToken)
	if r.Status != 200 {
		t.Fatalf("GET /v1/events: %s", r)
	}
	var journal struct {
		Events []struct {
			Type    string `json:"type"`
			Subject string `json:"subject"`
		} `json:"events"`
	}
	r.decode(t, &journal)
	if len(journal.Events) == 0 {
		t.Fatalf("the journal is empty: %s", r)
	}
	for _, ev := range journal.Events {
		if ev.Type == "wakegate.fault.undeliverable" {
			t.Errorf("the demo journaled %s about %s", ev.Type, ev.Subject)
		}
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
