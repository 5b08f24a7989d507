package keyspace

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestMain is the TestMain of every package that registers scripts:
//
//	func TestMain(m *testing.M) { keyspace.TestMain(m) }
//
// It runs the package's tests, in which every script call checks that its
// KEYS share one cluster slot (see Script), and then, when they passed and
// ran unfiltered (no -run, -skip or -short), fails them if a script of the
// package — registered under the package's directory — never ran: a new
// script needs a test that runs it, so its KEYS are checked.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && !filtered() {
		if missing, err := notRun(); err != nil {
			fmt.Fprintln(os.Stderr, "keyspace.TestMain:", err)
			code = 1
		} else if len(missing) > 0 {
			fmt.Fprintf(os.Stderr, "keyspace.TestMain: no test ran these scripts, so their KEYS were not checked for one slot: %q\n", missing)
			code = 1
		}
	}
	os.Exit(code)
}

func filtered() bool {
	for _, name := range []string{"test.run", "test.skip"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return true
		}
	}
	return testing.Short()
}

// notRun answers the scripts registered under the working directory (the
// package under test) that no call ran.
func notRun() ([]string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("working directory: %w", err)
	}
	root, err := ModuleRoot(wd)
	if err != nil {
		return nil, err
	}
	pkg, err := filepath.Rel(root, wd)
	if err != nil {
		return nil, fmt.Errorf("package directory: %w", err)
	}
	registry.Lock()
	defer registry.Unlock()
	var missing []string
	for name := range registry.scripts {
		if filepath.Dir(filepath.FromSlash(name)) == pkg && registry.ran[name] == 0 {
			missing = append(missing, name)
		}
	}
	return missing, nil
}

// ModuleRoot answers the directory of the go.mod at or above dir.
func ModuleRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod at or above %s", dir)
		}
	}
}
