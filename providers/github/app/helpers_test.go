package app

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/wakegate/wakegate/providers/github/app/apptest"
)

// The tests run against apptest's fake GitHub API, which fails the test on any request
// GitHub would refuse for its credentials.

// newTestClient is a client of the fake's App.
func newTestClient(t *testing.T, g *apptest.GitHub) *Client {
	t.Helper()
	_, pem := apptest.Key()
	c, err := NewClient(Config{AppID: apptest.AppID, PrivateKey: pem, APIURL: g.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// logBuffer collects JSON logs, safe for concurrent writers.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newLog() (*slog.Logger, *logBuffer) {
	buf := &logBuffer{}
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// assertNoSecrets fails when the logs carry the App key or any JWT or
// token the fake saw or issued.
func assertNoSecrets(t *testing.T, logs string, g *apptest.GitHub) {
	t.Helper()
	_, pem := apptest.Key()
	body := strings.Split(string(pem), "\n")[1] // a line of the key's base64
	if strings.Contains(logs, body) {
		t.Error("the logs carry the App private key")
	}
	creds := g.Credentials()
	if len(creds) == 0 {
		t.Fatal("no credential was used: the check proves nothing")
	}
	for _, c := range creds {
		if strings.Contains(logs, c) {
			t.Errorf("the logs carry a credential (%.12s…)", c)
		}
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// counterValue reads a counter.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
