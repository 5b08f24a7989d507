package main

import (
	"encoding/json"
	"testing"
)

func TestCreatedPR(t *testing.T) {
	bash := func(cmd string, resp any) hookInput {
		in, _ := json.Marshal(map[string]any{"command": cmd})
		out, _ := json.Marshal(resp)
		return hookInput{ToolName: "Bash", ToolInput: in, ToolResponse: out}
	}
	stdout := func(s string) map[string]any { return map[string]any{"stdout": s, "stderr": ""} }
	const u = "https://github.com/org/repo/pull/12"
	for _, c := range []struct {
		name   string
		in     hookInput
		repo   string
		number int
	}{
		{"gh pr create", bash("gh pr create --fill", stdout("Creating pull request\n"+u+"\n")), "org/repo", 12},
		{"gh pr create, URL on stderr", bash("gh pr create --fill", map[string]any{"stdout": "", "stderr": u}), "org/repo", 12},
		{"a string response", bash("gh pr create --fill", u), "org/repo", 12},
		{"hub", bash("hub pull-request -m x", stdout(u)), "org/repo", 12},
		{"the REST API", bash("gh api repos/org/repo/pulls -f title=x -f head=b -f base=main",
			stdout(`{"url":"https://api.github.com/repos/org/repo/pulls/12","html_url":"`+u+`","body":"see https://github.com/org/repo/pull/3"}`)), "org/repo", 12},
		{"a script that ran gh", bash("./scripts/open-pr.sh", stdout("pushing…\n  "+u+"  \n")), "org/repo", 12},
		{"a URL inside a line", bash("./scripts/notes.sh", stdout("merged in "+u+" last week")), "", 0},
		{"gh pr view", bash("gh pr view 12", stdout(u)), "", 0},
		{"gh pr list", bash("gh pr list", stdout(u+"\n")), "", 0},
		{"git log", bash("git log -3", stdout(u)), "", 0},
		{"gh pr create failed", bash("gh pr create --fill", map[string]any{"stdout": "", "stderr": "a pull request already exists"}), "", 0},
		{"not Bash", hookInput{ToolName: "Edit", ToolResponse: json.RawMessage(`{"filePath":"` + u + `"}`)}, "", 0},
		{"no input", hookInput{}, "", 0},
	} {
		repo, n, ok := createdPR(c.in)
		if repo != c.repo || n != c.number || ok != (c.number > 0) {
			t.Errorf("%s: %s#%d %v, want %s#%d", c.name, repo, n, ok, c.repo, c.number)
		}
	}
}
