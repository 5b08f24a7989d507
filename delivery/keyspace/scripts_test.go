package keyspace_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	// Every package with Lua scripts, so that they register here.
	_ "github.com/wakegate/wakegate/delivery/escalate"
	_ "github.com/wakegate/wakegate/delivery/holds"
	_ "github.com/wakegate/wakegate/delivery/inbox"
	_ "github.com/wakegate/wakegate/delivery/ingest"
	_ "github.com/wakegate/wakegate/delivery/journal"
	_ "github.com/wakegate/wakegate/delivery/outbound"
	_ "github.com/wakegate/wakegate/delivery/ratelimit"
	_ "github.com/wakegate/wakegate/delivery/sessions"
	_ "github.com/wakegate/wakegate/delivery/subscriptions"
	_ "github.com/wakegate/wakegate/delivery/supervision"
	_ "github.com/wakegate/wakegate/delivery/tracker"
	_ "github.com/wakegate/wakegate/workers/ghapp"
	_ "github.com/wakegate/wakegate/workers/health"
	_ "github.com/wakegate/wakegate/workers/route"

	"github.com/wakegate/wakegate/delivery/keyspace"
)

// TestEveryScript keeps the scripts findable and their slot check
// complete (docs/design.md §14, "Lua scripts"):
//   - every .lua file of the repository is a registered script's entry or
//     a part another script includes, and each entry is its file as is;
//   - no Go file outside keyspace builds a script (redis.NewScript) or
//     holds Lua: every script is a keyspace.Script;
//   - every entry file's header states its KEYS, ARGV, what it returns and
//     the rule it implements (docs/design.md §N);
//   - every package that registers a script runs keyspace.TestMain, which
//     fails its tests when a script never ran or ran with KEYS in several
//     slots;
//   - docs/design.md's index names every script.
func TestEveryScript(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := keyspace.ModuleRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	scripts := keyspace.Scripts()
	if len(scripts) < 40 {
		t.Fatalf("%d scripts registered; is a package missing from this test's imports?", len(scripts))
	}
	parts := map[string]bool{}
	for _, s := range scripts {
		for _, p := range s.Parts[:len(s.Parts)-1] {
			parts[p] = true
		}
	}
	byName := map[string]*keyspace.Script{}
	for _, s := range scripts {
		byName[s.Name] = s
	}
	design, err := os.ReadFile(filepath.Join(root, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	var luaFiles []string
	newScript := regexp.MustCompile(`redis\.NewScript(ServerSHA)?\(`)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		switch {
		case strings.HasSuffix(path, ".lua"):
			luaFiles = append(luaFiles, rel)
		case strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") && !strings.HasPrefix(rel, "delivery/keyspace/"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if newScript.Match(b) {
				t.Errorf("%s builds a script with redis.NewScript: use keyspace.NewScript and a .lua file", rel)
			}
			if strings.Contains(string(b), "redis.call(") {
				t.Errorf("%s holds Lua in a Go string: move it to a .lua file", rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]bool{}
	for _, rel := range luaFiles {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		if s := byName[rel]; s != nil {
			entries[rel] = true
			if s.Parts[len(s.Parts)-1] != src {
				t.Errorf("%s: the script registered under this name does not end with the file", rel)
			}
			checkHeader(t, rel, src)
			if !strings.Contains(string(design), "`"+rel+"`") {
				t.Errorf("%s is missing from the script index of docs/design.md §14", rel)
			}
			continue
		}
		if !parts[src] {
			t.Errorf("%s is neither a registered script nor a part of one (a package with scripts missing from this test's imports?)", rel)
		}
	}
	pkgs := map[string]bool{}
	for _, s := range scripts {
		if !entries[s.Name] {
			t.Errorf("script %s: no such .lua file", s.Name)
		}
		pkgs[filepath.Dir(filepath.FromSlash(s.Name))] = true
	}
	for pkg := range pkgs {
		if !runsTestMain(t, filepath.Join(root, pkg)) {
			t.Errorf("%s registers scripts but its tests do not run keyspace.TestMain", pkg)
		}
	}
}

var section = regexp.MustCompile(`docs/design\.md §\d+`)

// checkHeader checks the leading comment of a script's entry file.
func checkHeader(t *testing.T, name, src string) {
	t.Helper()
	var hdr strings.Builder
	sc := bufio.NewScanner(strings.NewReader(src))
	for sc.Scan() && strings.HasPrefix(sc.Text(), "--") {
		hdr.WriteString(sc.Text() + "\n")
	}
	h := hdr.String()
	for _, want := range []string{"KEYS", "ARGV", "Return"} {
		if !strings.Contains(h, want) {
			t.Errorf("%s: its header does not state %s", name, want)
		}
	}
	if !section.MatchString(h) {
		t.Errorf("%s: its header does not cite the rule it implements (docs/design.md §N)", name)
	}
}

// runsTestMain reports whether a package's tests call keyspace.TestMain.
func runsTestMain(t *testing.T, dir string) bool {
	t.Helper()
	tests, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(tests, func(f string) bool {
		b, err := os.ReadFile(f)
		return err == nil && strings.Contains(string(b), "keyspace.TestMain(m)")
	})
}
