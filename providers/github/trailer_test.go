package github

import "testing"

func TestTrailer(t *testing.T) {
	for body, want := range map[string]string{
		"":                                      "",
		"Fixes a bug.":                          "",
		"Fixes a bug.\n\nWakegate-Session: w-1": "w-1",
		"wakegate-session:   abc.def  \r\n":     "abc.def",
		"Wakegate-Session: session:abc":         "abc",
		"Wakegate-Session: a\nWakegate-Session: b": "b",
		"Wakegate-Session: a/b":                    "",
		"Wakegate-Session: a b":                    "",
		"see Wakegate-Session: a in the docs":      "",
		"Wakegate-Session:":                        "",
	} {
		if got := trailer(body); got != want {
			t.Errorf("trailer(%q) = %q, want %q", body, got, want)
		}
	}
}
