package agent

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

// data_base64 is kept with its datacontenttype; bad base64, data and
// data_base64 together, and JSON data of a non-JSON type are refused.
func TestPrepareDataBase64(t *testing.T) {
	c := claims("session:a", "events:push")
	ev := func(extra string) string {
		return `{"specversion":"1.0","id":"1","source":"x","type":"a.b"` + extra + `}`
	}
	p, errs, err := prep(t, c, ev(`,"datacontenttype":"application/octet-stream","data_base64":"aGVsbG8="`))
	if err != nil || len(errs) > 0 {
		t.Fatalf("refused: %v %v", err, errs)
	}
	if e := p[0].Event; string(e.DataBase64) != "hello" || e.DataContentType != "application/octet-stream" || e.Data != nil {
		t.Fatalf("event %+v", e)
	}
	for _, bad := range []string{
		`,"data_base64":"not base64!"`,
		`,"data_base64":"aGVsbG8=","data":{"a":1}`,
		`,"datacontenttype":"text/plain","data":{"a":1}`,
		`,"data":"hello"`,
	} {
		if _, errs, _ := prep(t, c, ev(bad)); len(errs) != 1 || !errors.Is(errs[0], ErrInvalid) {
			t.Errorf("%s: %v, want one invalid", bad, errs)
		}
	}
}

// Extension attributes with the spec's names and scalar values are kept;
// bad names, non-scalars and too many or too large are refused.
func TestPrepareExtensions(t *testing.T) {
	c := claims("session:a", "events:push")
	ev := func(extra string) string {
		return `{"specversion":"1.0","id":"1","source":"x","type":"a.b"` + extra + `}`
	}
	p, errs, _ := prep(t, c, ev(`,"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","n":7,"ok":true,"gone":null,"lineage":"x y","terminal":true`))
	if len(errs) > 0 {
		t.Fatalf("refused: %v", errs)
	}
	e := p[0].Event
	if len(e.Extensions) != 3 || string(e.Extensions["n"]) != "7" || e.Extension("traceparent") == "" || e.Lineage != nil || e.Terminal {
		t.Fatalf("extensions %v lineage %v terminal %v", e.Extensions, e.Lineage, e.Terminal)
	}
	many := ""
	for i := 0; i < 17; i++ {
		many += `,"x` + string(rune('a'+i)) + `":1`
	}
	for _, bad := range []string{
		`,"Trace":"x"`, `,"trace_id":"x"`, `,"abcdefghijklmnopqrstu":"x"`,
		`,"obj":{"a":1}`, `,"arr":[1]`, `,"f":1.5`, `,"big":4294967296`,
		`,"dataschema":"not a uri"`,
		many, `,"a":"` + strings.Repeat("x", 2100) + `"`,
	} {
		if _, errs, _ := prep(t, c, ev(bad)); len(errs) != 1 || !errors.Is(errs[0], ErrInvalid) {
			t.Errorf("%.60s: %v, want one invalid", bad, errs)
		}
	}
}

// A binary-mode request becomes the same event, and its refusals name
// headers and the body.
func TestBinaryMode(t *testing.T) {
	c := claims("session:a", "events:push")
	h := http.Header{}
	h.Set("Ce-Specversion", "1.0")
	h.Set("Ce-Id", "b1")
	h.Set("Ce-Source", "x")
	h.Set("Ce-Type", "session.turn_ended")
	h.Set("Ce-Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	h.Set("Ce-Summary", "done%20now")
	h.Set("Content-Type", "application/json")
	if !IsBinary(h, "application/json") || IsBinary(h, "application/cloudevents+json") || IsBinary(http.Header{}, "application/json") {
		t.Fatal("IsBinary")
	}
	raw, err := FromBinary(h, []byte(`{"idle":true}`))
	if err != nil {
		t.Fatal(err)
	}
	p, errs := PrepareBinary(c, raw, evNow)
	if len(errs) > 0 {
		t.Fatalf("refused: %v", errs)
	}
	e := p[0].Event
	if e.ID != "b1" || e.Priority != "attention" || e.Summary != "done now" || e.Extension("traceparent") == "" || string(e.Data) != `{"idle":true}` {
		t.Fatalf("event %+v", e)
	}
	h.Set("Content-Type", "text/plain")
	raw, _ = FromBinary(h, []byte("hello"))
	if p, errs := PrepareBinary(c, raw, evNow); len(errs) > 0 || string(p[0].Event.DataBase64) != "hello" || p[0].Event.DataContentType != "text/plain" {
		t.Fatalf("text body: %v %+v", errs, p)
	}
	h.Set("Ce-Specversion", "0.3")
	raw, _ = FromBinary(h, nil)
	if _, errs := PrepareBinary(c, raw, evNow); len(errs) != 1 || !strings.Contains(errs[0].Detail, "header ce-specversion") {
		t.Fatalf("errs %v, want one naming header ce-specversion", errs)
	}
	h.Set("Ce-Specversion", "1.0")
	h.Set("Content-Type", "application/json")
	raw, _ = FromBinary(h, []byte(`[1]`))
	if _, errs := PrepareBinary(c, raw, evNow); len(errs) != 1 || !strings.Contains(errs[0].Detail, "the body") {
		t.Fatalf("errs %v, want one naming the body", errs)
	}
	if _, err := FromBinary(h, []byte(`{`)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("bad JSON body: %v", err)
	}
	h.Set("Ce-Data", "x")
	if _, err := FromBinary(h, nil); !errors.Is(err, ErrMalformed) {
		t.Fatalf("ce-data header: %v", err)
	}
}
