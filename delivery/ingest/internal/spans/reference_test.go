package spans

// The scan as it was before its fast loops (docs/design.md §14): the
// reference FuzzFindReference holds Find to, span for span.

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// refFind is Find as it was: it returns, in order and without overlap, the spans of the shared
// members' object values in a JSON body. It only reads the bytes: a body
// that is not a JSON object (a form-encoded one) or that it cannot follow
// gives no spans, and the record then keeps the whole body. Whatever it
// returns, cutting the spans out and putting them back yields the body
// byte for byte.
func refFind(b []byte) []Span {
	i := refSkipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil
	}
	var out []Span
	if _, ok := refScanObject(b, i, 1, &out); !ok {
		return nil
	}
	return out
}

func refSkipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// stringEnd returns the index after the closing quote of the string whose
// opening quote is at i, or -1.
func refStringEnd(b []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		// an escaped quote has an odd number of backslashes before it
		n := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		j++
		if n%2 == 0 {
			return j
		}
	}
}

// skipValue returns the index after the JSON value starting at i (no
// whitespace before it), without looking for members, or -1.
func refSkipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return refStringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e := refStringEnd(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default: // number, true, false, null
		j := i
		for j < len(b) {
			c := b[j]
			if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\r' || c == '\t' {
				break
			}
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// scanObject reads the object at b[i] == '{' at depth, appending the spans
// of shared members' object values, and returns the index after it.
func refScanObject(b []byte, i, depth int, out *[]Span) (int, bool) {
	i = refSkipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for i < len(b) {
		if b[i] != '"' {
			return 0, false
		}
		ke := refStringEnd(b, i)
		if ke < 0 {
			return 0, false
		}
		key := b[i+1 : ke-1]
		i = refSkipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		i = refSkipWS(b, i+1)
		if i >= len(b) {
			return 0, false
		}
		var end int
		switch {
		case b[i] == '{' && sharedMembers[string(key)]:
			end = refSkipValue(b, i)
			if end < 0 {
				return 0, false
			}
			if end-i >= MinSpan {
				*out = append(*out, Span{i, end})
			}
		case b[i] == '[' && sharedArrays[string(key)]:
			var ok bool
			if end, ok = refSharedElements(b, i, out); !ok {
				return 0, false
			}
		case (b[i] == '{' || b[i] == '[') && depth < maxSpanDepth:
			var ok bool
			if b[i] == '{' {
				end, ok = refScanObject(b, i, depth+1, out)
			} else {
				end, ok = refScanArray(b, i, depth+1, out)
			}
			if !ok {
				return 0, false
			}
		default:
			end = refSkipValue(b, i)
			if end < 0 {
				return 0, false
			}
		}
		i = refSkipWS(b, end)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = refSkipWS(b, i+1)
		case '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
	return 0, false
}

// scanArray reads the array at b[i] == '['; its elements' members are
// looked into as an object's are.
func refScanArray(b []byte, i, depth int, out *[]Span) (int, bool) {
	i = refSkipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for i < len(b) {
		var end int
		switch {
		case b[i] == '{' && depth < maxSpanDepth:
			var ok bool
			if end, ok = refScanObject(b, i, depth+1, out); !ok {
				return 0, false
			}
		default:
			if end = refSkipValue(b, i); end < 0 {
				return 0, false
			}
		}
		i = refSkipWS(b, end)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = refSkipWS(b, i+1)
		case ']':
			return i + 1, true
		default:
			return 0, false
		}
	}
	return 0, false
}

// sharedElements reads the array at b[i] == '[' whose object elements are
// each a span (when large enough).
func refSharedElements(b []byte, i int, out *[]Span) (int, bool) {
	i = refSkipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for i < len(b) {
		end := refSkipValue(b, i)
		if end < 0 {
			return 0, false
		}
		if b[i] == '{' && end-i >= MinSpan {
			*out = append(*out, Span{i, end})
		}
		i = refSkipWS(b, end)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = refSkipWS(b, i+1)
		case ']':
			return i + 1, true
		default:
			return 0, false
		}
	}
	return 0, false
}

// FuzzFindReference: Find returns refFind's spans, span for span, on any
// input — well formed JSON or not (docs/design.md §14: the split is part
// of a body's marker, so a faster scan must not move a span).
func FuzzFindReference(f *testing.F) {
	files, _ := filepath.Glob("../../../../testdata/github/*/*/*.json")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	long := strings.Repeat("x", 300)
	for _, s := range []string{
		`{"repository":{"a":"` + long + `"},"sender":{"b":"\"}{"}}`,
		`{"repository":{"a":"` + long + `\\"},"sender":{"b":"\\\"}{\\\\"}}`,
		`{"assignees":[{"login":"` + long + `"}, 1, "s"]}`,
		`{"x":{"y":{"repo":{"a":"` + long + `","b":[{"c":"]"}]}}}}`,
		`{"repository":{"a":"` + long + `"]}`,
		`{"repository":{"a":"` + long + `\`,
		`{"user":{"é":"` + long + "\xff\x80" + `"}}`,
		`payload=%7B%7D`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := refFind(b)
		// with the objects seen lately as the inputs before left them,
		// then with this input's own (a second Find meets them all)
		for range 2 {
			if got := Find(b); !slices.Equal(got, want) {
				t.Fatalf("Find = %v, the reference %v", got, want)
			}
		}
		// every suffix too: the fast loops' 8-byte reads meet the end
		// of the input at every alignment
		for k := 1; k < len(b) && k <= 16; k++ {
			if got, want := Find(b[:len(b)-k]), refFind(b[:len(b)-k]); !slices.Equal(got, want) {
				t.Fatalf("cut by %d: Find = %v, the reference %v", k, got, want)
			}
		}
	})
}

// TestFindReferenceFixtures runs FuzzFindReference's property over every
// fixture and every cut of the first one's prefix (the fast loops' ends).
func TestFindReferenceFixtures(t *testing.T) {
	files, _ := filepath.Glob("../../../../testdata/github/*/*/*.json")
	if len(files) == 0 {
		t.Fatal("no fixtures")
	}
	spansSeen := 0
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		got, want := Find(b), refFind(b)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: Find = %v, the reference %v", p, got, want)
		}
		spansSeen += len(got)
	}
	if spansSeen == 0 {
		t.Fatal("no fixture has a span")
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(b) {
		if got, want := Find(b[:n]), refFind(b[:n]); !slices.Equal(got, want) {
			t.Fatalf("%s cut at %d: Find = %v, the reference %v", files[0], n, got, want)
		}
	}
}

// BenchmarkFindReference: BenchmarkFind's body through refFind, to read
// beside it from the same run.
func BenchmarkFindReference(b *testing.B) {
	body, err := os.ReadFile("../../../../testdata/github/octokit/pull_request/opened.payload.json")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if len(refFind(body)) == 0 {
			b.Fatal("no spans")
		}
	}
}

// TestFindSeenObjects: an object that starts as one seen before (its
// first seenKeyLen bytes and more) but differs, or is cut short, or
// runs on, is scanned, not taken for the one seen.
func TestFindSeenObjects(t *testing.T) {
	seen = seenCache{}
	long := strings.Repeat("x", 300)
	obj := `{"full_name":"o/r","description":"` + long + `","n":1}`
	first := `{"repository":` + obj + `,"sender":` + obj + `}`
	if got := Find([]byte(first)); len(got) != 2 || got[0].End-got[0].Start != len(obj) {
		t.Fatalf("Find = %v", got)
	}
	if seen.match([]byte(obj)) != len(obj) {
		t.Fatal("the object was not remembered")
	}
	for _, body := range []string{
		first,
		`{"repository":` + obj[:len(obj)-3] + `2}}`,                            // differs at its end
		`{"repository":` + obj[:200] + `"}]}`,                                  // a bracket closes it early
		`{"repository":` + obj[:len(obj)-1] + `,"m":{"o":"}"}}` + `,"user":1}`, // runs on
		`{"repository":` + obj[:len(obj)-1],                                    // cut short
		`{"repository":` + obj + `}`,                                           // no sender
		`{"repository":` + obj[:100] + `\"` + obj[100:] + `}`,                  // an escape inside
	} {
		got, want := Find([]byte(body)), refFind([]byte(body))
		if !slices.Equal(got, want) {
			t.Fatalf("%.80s…: Find = %v, the reference %v", body, got, want)
		}
	}
}
