package inbox

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/wakegate/wakegate/providers/event"
)

// headlineOf reads what a full decode of the headline reads: top-level
// members only (data's own "type" is not the event's), escapes decoded,
// absent members empty, and the full decode's error for what is not an
// event.
func TestHeadlineOf(t *testing.T) {
	for _, raw := range []string{
		`{"specversion":"1.0","id":"1","source":"//t","type":"github.pull_request.opened","subject":"github:o/r#1","summary":"PR #1 opened","data":{"type":"inner","subject":"no","summary":"no"}}`,
		`{"data":{"type":"inner","list":[{"summary":"x"}]},"summary":"quote \" and \\ and \u00e9 and \n","type":"session.awaiting_input","subject":"session:a"}`,
		`{"type":"t","subject":"s"}`,
		`{"type":"t","summary":null,"subject":"s","n":12,"b":true,"z":[1,2,{"a":"}"}]}`,
		` { "type" : "spaced" , "subject" : "s" } `,
		`{"type":1}`,
		`[1,2]`,
		`not json`,
	} {
		var want headline
		wantErr := json.Unmarshal([]byte(raw), &want)
		got, err := headlineOf([]byte(raw))
		if (err != nil) != (wantErr != nil) || got != want {
			t.Errorf("headlineOf(%s) = %+v, %v; want %+v, %v", raw, got, err, want, wantErr)
		}
	}
}

func BenchmarkHeadlineOf(b *testing.B) {
	e := &event.Event{SpecVersion: "1.0", ID: "x", Source: "//github.com/o/r", Type: "github.pull_request.ready", Subject: "github:o/r#7",
		Workspace: "ws", SessionID: "kid", Priority: event.Attention, Summary: "PR #7 is ready to merge", Time: time.Now().UTC(),
		Data: json.RawMessage(`{"repo":"o/r","number":7,"title":"a title","head":{"sha":"0123456789abcdef0123456789abcdef01234567","ref":"feature"},"checks":[{"name":"ci","conclusion":"success"},{"name":"lint","conclusion":"success"}]}`)}
	raw, err := json.Marshal(e)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("members", func(b *testing.B) {
		for range b.N {
			if _, err := headlineOf(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unmarshal", func(b *testing.B) {
		for range b.N {
			var h headline
			if err := json.Unmarshal(raw, &h); err != nil {
				b.Fatal(err)
			}
		}
	})
}
