package github

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/wakegate/wakegate/providers/event"
)

// normalizeTwoPass is Normalize as it was before the one-pass decode: the
// envelope, then each handler decoding its own payload. The one-pass
// Normalize must give the same Fact and the same error text on every input.
func normalizeTwoPass(eventType string, body []byte) (Fact, error) {
	var env envelope
	if err := unmarshal(body, &env); err != nil {
		return Fact{}, malformed(eventType, err)
	}
	f := Fact{Event: eventType, Action: env.Action, Repo: env.Repository.FullName}
	var err error
	switch eventType {
	case "ping":
		f.Ignored = "ping"
	case "pull_request":
		err = f.pullRequest(body, nil)
	case "check_run":
		err = f.checkRun(body, nil)
	case "check_suite":
		err = f.checkSuite(body, nil)
	case "status":
		err = f.status(body, nil)
	case "pull_request_review":
		err = f.review(body, nil)
	case "issue_comment":
		err = f.issueComment(body, nil)
	case "deployment_status":
		err = f.deploymentStatus(body, nil)
	case "installation":
		err = f.installation(body, nil)
	default:
		f.Ignored = "event not mapped: " + eventType
	}
	if err != nil {
		return Fact{}, err
	}
	if f.Ignored == "" && f.Type != "" {
		f.Priority = event.DefaultPriority(f.Type, f.Data)
	}
	return f, nil
}

func sameAsTwoPass(t *testing.T, eventType string, body []byte) {
	t.Helper()
	got, gotErr := Normalize(eventType, body)
	want, wantErr := normalizeTwoPass(eventType, body)
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("Normalize(%q, %.200q): error %v, two passes: %v", eventType, body, gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Normalize(%q, %.200q) = %+v, two passes: %+v", eventType, body, got, want)
	}
}

// oddSeeds are payloads where the one pass fails but the envelope does not
// (an unmapped action whose payload has the wrong shape), and payloads that
// fail in the envelope or in the payload.
var oddSeeds = [][2]string{
	{"pull_request", `{"action":"assigned","repository":{"full_name":"o/r"},"pull_request":{"number":"x"}}`},
	{"pull_request", `{"action":"opened","repository":{"full_name":"o/r"},"pull_request":{"number":"x"}}`},
	{"pull_request", `{"action":"opened","repository":{"full_name":1},"pull_request":{"number":1}}`},
	{"pull_request", `{"action":"opened","installation":{"id":"x"},"repository":{"full_name":"o/r"},"pull_request":{"number":1}}`},
	{"check_run", `{"action":"requested_action","repository":{"full_name":"o/r"},"check_run":[]}`},
	{"check_suite", `{"action":"completed","repository":{"full_name":"o/r"},"check_suite":{"id":"9"}}`},
	{"status", `{"repository":{"full_name":"o/r"},"sha":"abc","context":"ci","state":"success","updated_at":"nope"}`},
	{"pull_request_review", `{"action":"edited","repository":{"full_name":"o/r"},"review":1}`},
	{"issue_comment", `{"action":"deleted","repository":{"full_name":"o/r"},"issue":{"number":"1"}}`},
	{"deployment_status", `{"repository":{"full_name":"o/r"},"deployment_status":{"state":1},"deployment":{"id":1,"sha":"a"}}`},
	{"installation", `{"action":"created","installation":{"id":1,"app_id":"x"}}`},
	{"installation", `{"action":"deleted","installation":{"id":"1"}}`},
	{"installation", `{"action":"Bad Action","installation":{"id":1,"created_at":"x"}}`},
	{"installation", `{"action":"created","installation":null,"repositories":[{"full_name":"o/r"}]}`},
	{"pull_request", `{"action":"opened","Action":"closed","REPOSITORY":{"FULL_NAME":"o/r"},"pull_request":{"number":1,"closed_at":"2024-01-02T03:04:05Z","updated_at":"2024-01-02T03:04:05\u005a"}}`},
	{"workflow_run", `{"action":"completed","repository":{"full_name":"o/r"}}`},
}

func TestNormalizeOnePassSameAsTwoPasses(t *testing.T) {
	for _, fx := range fixtures(t) {
		sameAsTwoPass(t, fx.event, fx.body)
	}
	for _, s := range append(append([][2]string{}, smallSeeds...), oddSeeds...) {
		sameAsTwoPass(t, s[0], []byte(s[1]))
	}
}

func FuzzNormalizeOnePass(f *testing.F) {
	for _, s := range append(append([][2]string{}, smallSeeds...), oddSeeds...) {
		f.Add(s[0], []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, eventType string, body []byte) {
		sameAsTwoPass(t, eventType, body)
	})
}

// FuzzPlainString: when plainString says a literal has no escapes, its
// value is the bytes between the quotes, as encoding/json decodes it.
func FuzzPlainString(f *testing.F) {
	for _, s := range []string{`"2024-01-02T03:04:05Z"`, `"a\"b"`, `"\u005a"`, `""`, `"é"`, "\"a\x01\"", `"`, `x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !plainString(b) {
			return
		}
		var s string
		if err := json.Unmarshal(b, &s); err != nil || s != string(b[1:len(b)-1]) {
			t.Fatalf("plainString(%q) but json.Unmarshal gives %q, %v", b, s, err)
		}
	})
}

// FuzzValidRepo holds validRepo to the expression it replaces.
func FuzzValidRepo(f *testing.F) {
	re := regexp.MustCompile(`^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+$`)
	for _, s := range []string{"o/r", "Codertocat/Hello-World", "o/r#1", "/r", "o/", "o//r", "o/r/x", "", "o.r", "é/r", "o/r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validRepo(s), re.MatchString(s); got != want {
			t.Fatalf("validRepo(%q) = %v, regexp says %v", s, got, want)
		}
	})
}

// FuzzOneLine: oneLine's shortcut for plain lines returns what the
// general path (control characters to spaces, spaces collapsed) does.
func FuzzOneLine(f *testing.F) {
	for _, s := range []string{"", "a", " a", "a ", "a  b", "a b", "a\tb", "Update the README", "caf\u00e9", "a\u2028b", "~\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := strings.Join(strings.Fields(strings.Map(func(r rune) rune {
			if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
				return ' '
			}
			return r
		}, s)), " ")
		if got := oneLine(s); got != want {
			t.Fatalf("oneLine(%q) = %q, want %q", s, got, want)
		}
	})
}
