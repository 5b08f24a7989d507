package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository root seen from this package.
const repoRoot = "../.."

// TestDocsLinksResolve: every relative link in the README and under docs/
// names a file or folder of the repository, and an #anchor into a Markdown
// file names one of its headings (GitHub's slugs).
func TestDocsLinksResolve(t *testing.T) {
	files := []string{filepath.Join(repoRoot, "README.md")}
	err := filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(body)) {
			if isExternal(l.target) {
				continue
			}
			checked++
			path, anchor, _ := strings.Cut(l.target, "#")
			target := f
			if path != "" {
				target = filepath.Join(filepath.Dir(f), filepath.FromSlash(path))
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s:%d: link %q: %v", rel(f), l.line, l.target, err)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			doc, err := os.ReadFile(target)
			if err != nil {
				t.Errorf("%s:%d: link %q: %v", rel(f), l.line, l.target, err)
				continue
			}
			if !markdownAnchors(string(doc))[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading #%s", rel(f), l.line, l.target, rel(target), anchor)
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d relative links checked: is the README still the front door?", checked)
	}
}

// TestNoPathOutsideTheRepository: no file of the repository refers to the
// folder beside it that the project was first built with.
func TestNoPathOutsideTheRepository(t *testing.T) {
	outside := ".." + "/shared" // split, so that this file does not match itself
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, outside) {
				t.Errorf("%s:%d refers to %s: %s", rel(p), i+1, outside, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

type mdLink struct {
	target string
	line   int
}

// headingLinkRE is a link inside a heading: GitHub slugs its text only.
var headingLinkRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

var linkRE = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)

// markdownLinks lists the inline links of a Markdown text outside code
// (fenced blocks and backquoted spans).
func markdownLinks(text string) []mdLink {
	var out []mdLink
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(stripCodeSpans(line), -1) {
			out = append(out, mdLink{target: m[1], line: i + 1})
		}
	}
	return out
}

// stripCodeSpans blanks `code` spans, keeping a link whose text is code
// ([`x`](y)) because its target lies outside the span.
func stripCodeSpans(line string) string {
	var b strings.Builder
	in := false
	for _, r := range line {
		if r == '`' {
			in = !in
			b.WriteRune(r)
			continue
		}
		if in {
			b.WriteRune('x')
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isExternal(target string) bool {
	for _, p := range []string{"http://", "https://", "mailto:"} {
		if strings.HasPrefix(target, p) {
			return true
		}
	}
	return false
}

// markdownAnchors are the anchors GitHub gives a text's headings: lower
// case, punctuation dropped, spaces to hyphens, a repeat suffixed -1, -2….
func markdownAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := headingLinkRE.ReplaceAllString(strings.TrimSpace(strings.TrimLeft(line, "#")), "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			anchors[slug+"-"+itoa(n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

func itoa(n int) string { return strconv.Itoa(n) }

func rel(p string) string {
	r, err := filepath.Rel(repoRoot, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(r)
}
