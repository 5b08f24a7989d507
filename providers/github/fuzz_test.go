package github

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/bytedance/sonic"
)

func FuzzNormalize(f *testing.F) {
	for _, fx := range fixtures(f) {
		f.Add(fx.event, fx.body)
	}
	// Small payloads with only the fields Normalize reads let mutations
	// reach every mapping quickly (the fixtures are up to 30 kB).
	for _, s := range smallSeeds {
		f.Add(s[0], []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, eventType string, body []byte) {
		fact, err := Normalize(eventType, body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		if _, err := json.Marshal(fact); err != nil {
			t.Fatalf("fact does not encode: %v", err)
		}
		got, err := EncodeFact(&fact)
		if err != nil {
			t.Fatalf("EncodeFact: %v", err)
		}
		if want, _ := sonic.ConfigStd.Marshal(&fact); !bytes.Equal(got, want) {
			t.Fatalf("EncodeFact\n%s\nsonic.ConfigStd\n%s", got, want)
		}
		checkInvariants(t, eventType, fact)
	})
}

func FuzzVerifySignature(f *testing.F) {
	f.Add(vectorSignature, []byte(vectorPayload), []byte(vectorSecret))
	f.Add("sha1=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", []byte(vectorPayload), []byte(vectorSecret))
	f.Add("sha256=abc", []byte{}, []byte{})
	// The body's content does not matter here and minimizing 30 kB inputs
	// would eat the fuzzing time: seed with the pings, the smallest fixtures.
	for _, fx := range fixtures(f) {
		if fx.event == "ping" {
			f.Add(sign(fx.body, []byte("fixture secret")), fx.body, []byte("fixture secret"))
		}
	}
	f.Fuzz(func(t *testing.T, header string, body, secret []byte) {
		err := VerifySignature(header, body, [][]byte{secret})
		if err != nil && !errors.Is(err, ErrSignature) {
			t.Fatalf("error does not wrap ErrSignature: %v", err)
		}
		if len(secret) == 0 {
			if err == nil {
				t.Fatal("accepted with an empty secret")
			}
			return
		}
		if err == nil && header != sign(body, secret) && !equalFoldHex(header, sign(body, secret)) {
			t.Fatalf("accepted %q, want %q", header, sign(body, secret))
		}
		if good := sign(body, secret); VerifySignature(good, body, [][]byte{secret}) != nil {
			t.Fatal("rejected a correct signature")
		}
	})
}

var smallSeeds = [][2]string{
	{"pull_request", `{"action":"closed","number":1,"repository":{"full_name":"o/r"},"pull_request":{"number":1,"state":"closed","merged":true,"labels":[{"name":"x"}],"head":{"sha":"abc"},"base":{"ref":"main"},"closed_at":"2024-01-02T03:04:05Z","updated_at":0}}`},
	{"pull_request", `{"action":"labeled","repository":{"full_name":"o/r"},"label":{"name":"bug"},"pull_request":{"number":2,"title":"t"}}`},
	{"pull_request", `{"action":"synchronize","before":"a","repository":{"full_name":"o/r"},"pull_request":{"number":2,"head":{"sha":"abcdef0123"}}}`},
	{"check_run", `{"action":"completed","repository":{"full_name":"o/r"},"check_run":{"name":"ci","head_sha":"abc","status":"completed","conclusion":"failure","completed_at":"2024-01-02T03:04:05+02:00","pull_requests":[{"number":1}]}}`},
	{"check_run", `{"action":"created","repository":{"full_name":"o/r"},"check_run":{"name":"ci","head_sha":"abc","started_at":null}}`},
	{"check_suite", `{"action":"completed","repository":{"full_name":"o/r"},"check_suite":{"id":9,"head_sha":"abc","conclusion":"success","app":{"slug":"a"}}}`},
	{"check_suite", `{"action":"requested","repository":{"full_name":"o/r"},"check_suite":{"id":9,"head_sha":"abc"}}`},
	{"status", `{"repository":{"full_name":"o/r"},"sha":"abc","context":"ci","state":"pending","updated_at":""}`},
	{"pull_request_review", `{"action":"submitted","repository":{"full_name":"o/r"},"review":{"state":"APPROVED","user":{"login":"u"}},"pull_request":{"number":1}}`},
	{"pull_request_review", `{"action":"dismissed","repository":{"full_name":"o/r"},"review":{"user":{"login":"u"},"submitted_at":"2024-01-02T03:04:05Z"},"pull_request":{"number":1,"updated_at":"2024-01-03T03:04:05Z"}}`},
	{"issue_comment", `{"action":"created","repository":{"full_name":"o/r"},"issue":{"number":1,"pull_request":{}},"comment":{"body":"hé","user":{"login":"u"}}}`},
	{"deployment_status", `{"repository":{"full_name":"o/r"},"deployment_status":{"state":"failure"},"deployment":{"id":1,"sha":"abc"}}`},
	{"installation", `{"action":"suspend","installation":{"id":1,"suspended_at":1700000000},"repositories":[{"full_name":"o/r"}]}`},
	{"ping", `{"zen":"z"}`},
}

// equalFoldHex reports whether a and b are the same signature up to the
// case of the hex digits.
func equalFoldHex(a, b string) bool {
	return len(a) == len(b) && len(a) > len(signaturePrefix) &&
		a[:len(signaturePrefix)] == b[:len(signaturePrefix)] &&
		toLowerASCII(a[len(signaturePrefix):]) == b[len(signaturePrefix):]
}

func toLowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'F' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
