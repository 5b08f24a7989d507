package github

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzDataAsEncodingJSON: setData encodes a fact's Data with sonic; the
// bytes are encoding/json's, for every Data type and any strings
// (escapes, HTML, U+2028, invalid UTF-8), ints and lists, so facts keep
// the Data they had when encoding/json made it.
func FuzzDataAsEncodingJSON(f *testing.F) {
	f.Add("o/r", "a <b> & \"c\"\n\t\x01\x7f", "é\u2028\u2029\xff\xfe", int64(-1), true)
	f.Add("", "\\", "\ufffd\xed\xa0\x80", int64(1<<62), false)
	f.Fuzz(func(t *testing.T, a, b, c string, n int64, flag bool) {
		for _, v := range []any{
			prData{Repo: a, Number: int(n), Action: b, Title: c, URL: a, Author: b, Head: c, Base: a, State: b,
				Draft: flag, Merged: !flag, Labels: []string{a, b, c}, Label: c, Before: b, Reason: a},
			prData{Labels: []string{}},
			prData{},
			checkData{Repo: a, SHA: b, Name: c, App: a, Status: b, Conclusion: c, State: a, Result: b, Description: c,
				URL: a, PullRequests: []int{int(n), 0}},
			checkData{},
			reviewData{Repo: a, Number: int(n), Title: b, URL: c, Reviewer: a, State: b, CommitID: c},
			commentData{Repo: a, Number: int(n), Title: b, URL: c, Author: a, PullRequest: flag, Body: b},
			deployData{Repo: a, SHA: b, Ref: c, Environment: a, DeploymentID: n, State: b, Description: c, URL: a, Creator: b},
			installData{InstallationID: n, Action: a, Account: b, TargetType: c, AppID: n, Repositories: []string{a, c}},
			installData{},
		} {
			want, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			var fa Fact
			if err := fa.setData(v); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(fa.Data, want) {
				t.Fatalf("%T: setData\n%s\nencoding/json\n%s", v, fa.Data, want)
			}
		}
	})
}
