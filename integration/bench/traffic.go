package bench

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/wakegate/wakegate/providers/agent"
)

// fixtures are real GitHub webhook bodies (octokit/webhooks, MIT: see
// fixtures/LICENSE.octokit), copied from testdata/github at the repository
// root so the binary carries its own load (TestEmbeddedFixturesMatchTestdata
// keeps the copies identical).
//
//go:embed fixtures/*.json
var fixtures embed.FS

// fixtureRepo is the repository every octokit fixture is about.
const fixtureRepo = "Codertocat/Hello-World"

func fixture(name string) []byte {
	b, err := fixtures.ReadFile("fixtures/" + name)
	if err != nil {
		panic(fmt.Sprintf("bench fixture %s: %v", name, err)) // embedded: cannot happen in a built binary
	}
	return b
}

// prTemplate is pull_request.opened (28 KB) with its PR number and
// repository made variable, so that every request is a different body
// (the gateway refuses a byte-identical body under a fresh GUID) while
// staying the same valid document.
type prTemplate struct{ head, mid, tail []byte }

func newPRTemplate(repo string) *prTemplate {
	raw := bytes.ReplaceAll(fixture("pull_request.opened.json"), []byte(fixtureRepo), []byte(repo))
	const field = `"number": 2,`
	i := bytes.Index(raw, []byte(field))
	k := bytes.Index(raw[i+len(field):], []byte(field))
	if i < 0 || k < 0 {
		panic("bench fixture pull_request.opened.json: no top-level and pull_request \"number\" fields")
	}
	j := i + len(field) + k
	t := &prTemplate{head: raw[:i+len(`"number": `)], mid: raw[i+len(field)-1 : j+len(`"number": `)], tail: raw[j+len(field)-1:]}
	if !json.Valid(t.body(123456789)) {
		panic("bench: the varied pull_request.opened is not valid JSON")
	}
	return t
}

// body is the fixture with PR number n (top level and pull_request.number).
func (t *prTemplate) body(n int64) []byte {
	num := strconv.AppendInt(nil, n, 10)
	b := make([]byte, 0, len(t.head)+len(t.mid)+len(t.tail)+2*len(num))
	return append(append(append(append(append(b, t.head...), num...), t.mid...), num...), t.tail...)
}

// webhook is a signed delivery of body under a fresh GUID, as GitHub
// sends it; it returns the GUID too.
func webhook(ctx context.Context, base, event string, body []byte) (*http.Request, string) {
	guid := uuid.NewString()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/webhooks/github", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/wakegate-bench")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", guid)
	req.Header.Set("X-GitHub-Hook-ID", "4242")
	m := hmac.New(sha256.New, []byte(webhookSecret))
	m.Write(body)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	return req, guid
}

// token mints an agent token of party with scope, valid for the run.
func token(party, scope string, valid time.Duration) string {
	cl := agent.Claims{Workspace: workspace, Scope: scope}
	cl.Subject = party
	cl.ExpiresAt = jwt.NewNumericDate(time.Now().Add(valid + time.Hour))
	tok, err := agent.Mint([]byte(tokenSecret), cl)
	if err != nil {
		panic(fmt.Sprintf("bench: mint a token: %v", err)) // a fixed HS256 secret cannot fail
	}
	return tok
}

// pushRequest is one CloudEvent (or a batch, for a JSON array) as token.
func pushRequest(ctx context.Context, base, tok string, body []byte) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/events", bytes.NewReader(body))
	if len(body) > 0 && body[0] == '[' {
		req.Header.Set("Content-Type", "application/cloudevents-batch+json")
	} else {
		req.Header.Set("Content-Type", "application/cloudevents+json")
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	return req
}

// api does one JSON request as tok, wants status, and decodes the answer
// into out (unless nil).
func api(ctx context.Context, c *http.Client, method, url, tok string, body any, status int, out any) error {
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	b, err := send(c, req, status)
	if err != nil {
		return err
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}
