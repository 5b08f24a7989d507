package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBenchScenarios runs every `wakegate bench` scenario for a few
// seconds through the real command line (gateway and worker processes on
// a private redis-server) and holds the report to what must be true at
// any speed: every phase sent load and got no error, every fact the tool
// sent was journaled and delivered exactly once where the scenario
// checks the ledger, and the report names its figures. Speed itself is
// not asserted here (the CI machine is shared); the figures are in
// docs/performance.md.
func TestBenchScenarios(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		args     []string
		check    func(*testing.T, benchReport)
	}{
		{"ingest", []string{"--rate", "200"}, checkIngestSplit},
		{"push", []string{"--sessions", "50"}, nil},
		{"push", []string{"--sessions", "20", "--scale"}, nil}, // 1 and 2 gateways × 1 and 2 workers
		{"fleet", []string{"--rate", "100", "--sessions", "100", "--supervisors", "5", "--prs", "20"}, checkFleetPush},
		{"fanout", []string{"--recipients", "50", "--rate", "2"}, nil},
		{"subscriptions", []string{"--rate", "50", "--subscriptions", "500", "--sessions", "1000", "--supervisors", "5"}, nil},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			rep := runBenchScenario(t, tc.scenario, tc.args...)
			if tc.check != nil {
				tc.check(t, rep)
			}
		})
	}
}

// checkIngestSplit holds ingest's split to its promise: with the workers
// paused the gateway still committed, and once they resumed the whole
// backlog was derived, settled and routed, at a CPU cost it could read.
func checkIngestSplit(t *testing.T, rep benchReport) {
	found := map[string]float64{}
	for _, r := range rep.Rows {
		for _, prefix := range []string{"ingest with the workers paused", "CPU per delivery of the gateway path", "CPU per delivery of derivation", "backlog of "} {
			if strings.HasPrefix(r.Target, prefix) {
				found[prefix] = r.Value
			}
		}
	}
	if len(found) != 4 {
		t.Fatalf("ingest split rows: found %v; notes %q", found, rep.Notes)
	}
	for prefix, v := range found {
		if v <= 0 {
			t.Errorf("%q: %v", prefix, v)
		}
	}
}

// checkFleetPush holds fleet's push side to its promise: its people got
// pushes, and the drain's count of entries left unacked is in the check
// (runBenchScenario holds every invariant to 0). How many wakes were
// re-decided at a push's 2xx depends on timing and is only logged.
func checkFleetPush(t *testing.T, rep benchReport) {
	perWake := -1.0
	for _, r := range rep.Rows {
		if strings.Contains(r.Target, "pushes received per decided wake") {
			perWake = r.Value
			t.Logf("%s: %.3g", r.Target, r.Value)
		}
	}
	if perWake <= 0 {
		t.Errorf("no pushes-per-decided-wake figure (%v); notes %q", perWake, rep.Notes)
	}
	if rep.Check == nil {
		t.Fatal("the fleet report has no ledger check")
	}
	found := false
	for _, inv := range rep.Check.Invariants {
		found = found || strings.HasPrefix(inv.Name, "push side: entries left unacked")
	}
	if !found {
		t.Errorf("the check does not count the push side's unacked entries")
	}
}

// TestBenchSoakWorkerKill is the soak with a worker SIGKILLed every
// second (a fault test): the ledger check must still find nothing lost,
// duplicated or misrouted.
func TestBenchSoakWorkerKill(t *testing.T) {
	rep := runBenchScenario(t, "soak", "--rate", "50", "--sessions", "40", "--supervisors", "4", "--prs", "8", "--kill-every", "1s")
	if rep.Check == nil {
		t.Fatal("the soak report has no ledger check")
	}
	kills := 0
	for _, n := range rep.Notes {
		if m := regexp.MustCompile(`^(\d+) worker kills`).FindStringSubmatch(n); m != nil {
			kills, _ = strconv.Atoi(m[1])
		}
	}
	if kills == 0 {
		t.Errorf("no worker was killed during the soak; notes: %q", rep.Notes)
	}
}

type benchReport struct {
	Phases []struct {
		Name     string         `json:"name"`
		N        int64          `json:"requests"`
		Errors   map[string]int `json:"errors"`
		Achieved float64        `json:"achieved_per_s"`
	} `json:"phases"`
	Rows []struct {
		Target string  `json:"target"`
		Value  float64 `json:"value"`
	} `json:"rows"`
	Check *struct {
		Sent, Lost, Duplicated, Misrouted int
		Invariants                        []struct {
			Name    string
			Count   int
			Example string
		}
	} `json:"check"`
	Notes []string `json:"notes"`
}

// runBenchScenario runs `wakegate bench <scenario>` for a few seconds and
// holds its report to what must be true at any speed.
func runBenchScenario(t *testing.T, scenario string, extra ...string) benchReport {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("wakegate bench starts its own redis-server: %v", err)
	}
	html := filepath.Join(t.TempDir(), "chart.html")
	args := append([]string{"bench", scenario, "--duration", "2s", "--warmup", "500ms", "--conns", "8", "--json", "--html", html}, extra...)
	cmd := exec.Command(binPath, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 3) { // 3: a figure missed its target
		t.Fatalf("wakegate %v: %v\nstderr:\n%s", args, err, stderr.String())
	}
	t.Logf("%s in %s", scenario, time.Since(start).Round(time.Millisecond))
	var rep benchReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("the --json report does not parse: %v\n%s", err, stdout.String())
	}
	if len(rep.Phases) == 0 || len(rep.Rows) == 0 {
		t.Fatalf("report without phases or figures:\n%s", stdout.String())
	}
	for _, p := range rep.Phases {
		if p.N == 0 || p.Achieved <= 0 || len(p.Errors) > 0 {
			t.Errorf("phase %q: %d requests, %.0f/s, errors %v", p.Name, p.N, p.Achieved, p.Errors)
		}
	}
	if c := rep.Check; c != nil {
		if c.Sent == 0 || c.Lost+c.Duplicated+c.Misrouted > 0 {
			t.Errorf("ledger check: %+v", *c)
		}
		for _, inv := range c.Invariants {
			if inv.Count > 0 {
				t.Errorf("invariant %q broken %d times, e.g. %s", inv.Name, inv.Count, inv.Example)
			}
		}
	}
	if b, err := os.ReadFile(html); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("--html wrote no chart: %v", err)
	}
	return rep
}
