package subscriptions

import (
	"errors"
	"testing"
)

// FuzzParse: any body is either a valid subscription or refused with one
// of the two documented errors — never a panic.
func FuzzParse(f *testing.F) {
	f.Add(`{"types": ["github.pull_request.*"], "subjects": ["github:org/repo#*"], "session": {"id": "abc", "scope": "subtree"}, "labels": ["team-a"], "min_priority": "attention", "delivery": "wake", "until": "subject_terminal"}`)
	f.Add(`{"subjects": ["github:org/repo#12"], "until": "subject_terminal"}`)
	f.Add(`{"session": {"id": "a/b"}}`)
	f.Add(`{"types": ["a.*.b"], "until": "2026-01-01T00:00:00Z"}`)
	f.Fuzz(func(t *testing.T, body string) {
		sub, err := Parse([]byte(body))
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUntil) {
				t.Fatalf("error %v wraps neither ErrInvalid nor ErrUntil", err)
			}
			return
		}
		if len(sub.Types)+len(sub.Subjects)+len(sub.Labels) == 0 && sub.Session == nil {
			t.Fatalf("accepted a subscription with no filter: %+v", sub)
		}
	})
}
