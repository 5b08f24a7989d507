package agent

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/wakegate/wakegate/providers/event"
)

func claims(sub, scope string) *Claims {
	return &Claims{Workspace: "ws", Scope: scope, RegisteredClaims: jwt.RegisteredClaims{Subject: sub}}
}

var evNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func prep(t *testing.T, c *Claims, body string) ([]*Prepared, []*EventError, error) {
	t.Helper()
	raw, _, err := Decode([]byte(body))
	if err != nil {
		return nil, nil, err
	}
	p, errs := Prepare(c, raw, evNow)
	return p, errs, nil
}

func TestPrepareSetsWhatTheServerOwns(t *testing.T) {
	body := `{"specversion":"1.0","id":"7","source":"x","type":"session.turn_ended","data":{"idle":true},
	  "terminal":true,"coalescekey":"mine","lineage":["evil"],"seq":"9"}`
	p, errs, err := prep(t, claims("session:abc", "events:push"), body)
	if err != nil || len(errs) > 0 {
		t.Fatalf("refused: %v %v", err, errs)
	}
	e := p[0].Event
	want := event.Event{SpecVersion: "1.0", ID: "7", Source: "//wakegate/ws/session:abc", Type: "session.turn_ended",
		Subject: "session:abc", Workspace: "ws", SessionID: "abc", Priority: event.Attention, CoalesceKey: "session:abc"}
	if e.Source != want.Source || e.Subject != want.Subject || e.SessionID != want.SessionID || e.Priority != want.Priority ||
		e.CoalesceKey != want.CoalesceKey || e.Terminal || e.Lineage != nil || e.Seq != "" || !e.Time.Equal(evNow) {
		t.Fatalf("event %+v", e)
	}
}

func TestPrepareRefusals(t *testing.T) {
	ev := func(extra string) string {
		return `{"specversion":"1.0","id":"1","source":"x","type":"session.turn_ended"` + extra + `}`
	}
	tests := []struct {
		name   string
		claims *Claims
		body   string
		want   error
	}{
		{"another workspace", claims("session:a", ""), ev(`,"workspace":"other"`), ErrForbidden},
		{"about another session", claims("session:a", ""), ev(`,"subject":"session:b"`), ErrForbidden},
		{"github type", claims("session:a", ""), `{"specversion":"1.0","id":"1","source":"x","type":"github.pull_request.ready"}`, ErrForbidden},
		{"wakegate type", claims("session:a", "events:push:any"), `{"specversion":"1.0","id":"1","source":"x","type":"wakegate.digest"}`, ErrForbidden},
		{"non-session subject", claims("session:a", "events:push:any"), ev(`,"subject":"github:o/r#1"`), ErrForbidden},
		{"priority above default", claims("session:a", ""), ev(`,"priority":"critical"`), ErrForbidden},
		{"bad specversion", claims("session:a", ""), `{"specversion":"0.3","id":"1","source":"x","type":"a.b"}`, ErrInvalid},
		{"no id", claims("session:a", ""), `{"specversion":"1.0","source":"x","type":"a.b"}`, ErrInvalid},
		{"bad type", claims("session:a", ""), `{"specversion":"1.0","id":"1","source":"x","type":"Nope"}`, ErrInvalid},
		{"data not an object", claims("session:a", ""), ev(`,"data":[1]`), ErrInvalid},
		{"human without subject", claims("human:ops", "events:push"), ev(``), ErrInvalid},
		{"pr_opened without number", claims("session:a", ""), `{"specversion":"1.0","id":"1","source":"x","type":"session.pr_opened","data":{"repo":"o/r"}}`, ErrInvalid},
		{"own parent", claims("session:a", ""), `{"specversion":"1.0","id":"1","source":"x","type":"session.spawned","data":{"parent":"a"}}`, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs, err := prep(t, tt.claims, tt.body)
			if err != nil || len(errs) != 1 || !errors.Is(errs[0], tt.want) {
				t.Fatalf("errs %v err %v, want one wrapping %v", errs, err, tt.want)
			}
		})
	}
	// events:push:any may push about another session and raise priority.
	if _, errs, _ := prep(t, claims("human:ops", "events:push events:push:any"), ev(`,"subject":"session:b","priority":"critical"`)); len(errs) != 0 {
		t.Fatalf("push:any refused: %v", errs)
	}
}

func TestDecodeBatches(t *testing.T) {
	one := `{"specversion":"1.0","id":"1","source":"x","type":"a.b"}`
	batch := func(n int) string { return "[" + strings.TrimSuffix(strings.Repeat(one+",", n), ",") + "]" }
	if raw, isBatch, err := Decode([]byte(batch(100))); err != nil || !isBatch || len(raw) != 100 {
		t.Fatalf("batch of 100: %d %v %v", len(raw), isBatch, err)
	}
	if _, _, err := Decode([]byte(batch(101))); !errors.Is(err, ErrTooMany) {
		t.Fatalf("batch of 101: %v", err)
	}
	if raw, isBatch, err := Decode([]byte(" [ ] ")); err != nil || !isBatch || len(raw) != 0 {
		t.Fatalf("empty batch: %d %v %v, want valid", len(raw), isBatch, err)
	}
	for _, bad := range []string{"", "nul", `"x"`, "{", "[1,"} {
		if _, _, err := Decode([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("Decode(%q) = %v, want ErrMalformed", bad, err)
		}
	}
	// Depth is checked first, in one linear scan before any parse: a body
	// nesting deeper than an event and its data may is refused as invalid
	// events (422) whatever follows, and only such a body.
	deep := strings.Repeat(`{"a":`, event.MaxDataDepth+1) + "1" + strings.Repeat("}", event.MaxDataDepth+1)
	for body, want := range map[string]error{
		`{"specversion":"1.0","id":"1","source":"x","type":"a.b","data":` + deep + `}`:   ErrInvalid,
		`[{"specversion":"1.0","id":"1","source":"x","type":"a.b","data":` + deep + `}]`: ErrInvalid,
		strings.Repeat("{", event.MaxDepth+1):                                            ErrInvalid,
		strings.Repeat("{", event.MaxDepth):                                              ErrMalformed,
		strings.Repeat("[", event.MaxDepth+1):                                            ErrMalformed, // a batch's own level
	} {
		if _, _, err := Decode([]byte(body)); !errors.Is(err, want) {
			t.Errorf("Decode(%.40q…) = %v, want %v", body, err, want)
		}
	}
	// A batch reports every bad event, by index.
	_, errs, _ := prep(t, claims("session:a", ""), `[`+one+`,{"id":"2"},`+one+`,{"specversion":"1.0","id":"4","source":"x","type":"github.x"}]`)
	if len(errs) != 2 || errs[0].Index != 1 || errs[1].Index != 3 {
		t.Fatalf("errs %+v", errs)
	}
}

func FuzzPrepare(f *testing.F) {
	f.Add(`{"specversion":"1.0","id":"1","source":"x","type":"session.spawned","data":{"parent":"p","labels":["a"]}}`)
	f.Add(`[{"specversion":"1.0","id":"1","source":"x","type":"session.pr_opened","data":{"repo":"o/r","number":2}}]`)
	f.Add(`{"specversion":"1.0","id":"1","source":"x","type":"session.paused","data":{"until":"2026-01-01T00:00:00Z"}}`)
	f.Add(`{"specversion":"1.0","id":"1","source":"x","type":"message.sent","priority":"critical","subject":"session:b"}`)
	c := claims("session:a", "events:push")
	f.Fuzz(func(t *testing.T, body string) {
		raw, _, err := Decode([]byte(body))
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooMany) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("Decode error %v wraps no sentinel", err)
			}
			// invalid (422) only for a body nesting deeper than an event may,
			// and always for one deeper than a batch of them may
			if (errors.Is(err, ErrInvalid) && event.CheckDepth([]byte(body), event.MaxDepth) == nil) ||
				(!errors.Is(err, ErrInvalid) && event.CheckDepth([]byte(body), event.MaxDepth+1) != nil) {
				t.Fatalf("Decode error %v: invalid (422) is for a body nesting too deep, and only for one", err)
			}
			return
		}
		ok, errs := Prepare(c, raw, evNow)
		if len(ok)+len(errs) != len(raw) {
			t.Fatalf("%d events in, %d + %d out", len(raw), len(ok), len(errs))
		}
		for _, e := range errs {
			if !errors.Is(e, ErrInvalid) && !errors.Is(e, ErrForbidden) {
				t.Fatalf("event error %v wraps no sentinel", e)
			}
		}
		for _, p := range ok {
			e := p.Event
			if e.Workspace != "ws" || e.Subject != "session:a" || e.Source != "//wakegate/ws/session:a" || !event.ValidType(e.Type) {
				t.Fatalf("accepted an event the token may not push: %+v", e)
			}
			if _, err := json.Marshal(e); err != nil {
				t.Fatalf("accepted event does not encode: %v", err)
			}
		}
	})
}
