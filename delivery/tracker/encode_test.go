package tracker

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestAppendInputMatchesMarshal: the batch's hand-written encoding of an
// input decodes to what json.Marshal's does, for every kind of fact and
// strings that need escaping.
func TestAppendInputMatchesMarshal(t *testing.T) {
	odd := []string{"", "plain", `a "quoted" \ back`, "line\nbreak\r\ttab", "ctl \x01\x1f", "<b>&amp;</b>",
		"é ü 漢字 🎉", "bad \xff utf-8", "sep \u2028 \u2029", "\x7f del"}
	var inputs []*applyInput
	for _, s := range odd {
		inputs = append(inputs,
			&applyInput{Workspace: "acme", Repo: "o/r", GUID: s, Source: "//github.com/o/r", Type: "github.pull_request.opened",
				Subject: "github:o/r#1", ID: s, Time: s, Priority: s, CoalesceKey: s, Terminal: s != "", Summary: s,
				EvAt: len(s), Number: 1, ShaSubject: s, DeploySHA: s,
				PR: &prInput{Number: 7, Action: s, State: "open", Draft: s == "", Merged: s != "", Head: s, Base: s, Author: s,
					Title: s, Labels: `["x"]`, UpdatedMS: 1733443200123, Trailer: s, TrailerKnown: s != "", ServerSource: s}},
			&applyInput{Workspace: "acme", Repo: s, GUID: "g", Check: &checkInput{SHA: s, Name: s, Suite: true, Result: s, AtMS: 5, PRs: []int{3, 1}}},
			&applyInput{Workspace: "acme", Repo: "o/r", GUID: "g", Check: &checkInput{SHA: s, Name: s}},
			&applyInput{Workspace: "acme", Repo: "o/r", GUID: "g", Check: &checkInput{SHA: s, PRs: []int{}}},
			&applyInput{Workspace: "acme", Repo: "o/r", GUID: "g", Review: &reviewInput{Number: 2, Reviewer: s, State: s, AtMS: -1}},
		)
	}
	for i, in := range inputs {
		want, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendInput(nil, in)
		if !ok {
			t.Fatalf("input %d: not encoded", i)
		}
		var w, g any
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("input %d: %s: %v", i, got, err)
		}
		if !reflect.DeepEqual(w, g) {
			t.Errorf("input %d:\n got %s\nwant %s", i, got, want)
		}
	}
	if _, ok := appendInput(nil, &applyInput{scriptCtx: scriptCtx{NowMS: 1}}); ok {
		t.Error("an input with a context was encoded")
	}
}
