package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

var (
	// binPath is the wakegate binary TestMain built for this run.
	binPath string
	// fixturesDir is testdata/github at the repository root.
	fixturesDir string
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	fixturesDir, _ = filepath.Abs(filepath.Join("..", "testdata", "github"))
	for _, sub := range []string{"octokit", "derived"} {
		if st, err := os.Stat(filepath.Join(fixturesDir, sub)); err != nil || !st.IsDir() {
			fmt.Fprintf(os.Stderr, "integration: GitHub fixtures missing at %s/%s (expected testdata/github at the repository root): %v\n", fixturesDir, sub, err)
			return 1
		}
	}
	// WAKEGATE_IT_BINARY runs the tests against a wakegate binary built
	// elsewhere (a bisect, a patched build) instead of building this tree.
	if bin := os.Getenv("WAKEGATE_IT_BINARY"); bin != "" {
		binPath = bin
		fmt.Fprintf(os.Stderr, "integration: using WAKEGATE_IT_BINARY=%s\n", bin)
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "wakegate-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	goBin := "go"
	if _, err := exec.LookPath(goBin); err != nil {
		goBin = "/usr/local/go/bin/go"
	}
	binPath = filepath.Join(dir, "wakegate")
	start := time.Now()
	// Built as the Dockerfile builds it.
	build := exec.Command(goBin, "build", "-tags", "nomsgpack", "-o", binPath, "./cmd/wakegate")
	build.Dir = ".." // the module root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "integration: go build ./cmd/wakegate: %v\n%s", err, out)
		return 1
	}
	fmt.Fprintf(os.Stderr, "integration: built %s in %s\n", binPath, time.Since(start).Round(time.Millisecond))
	return m.Run()
}
