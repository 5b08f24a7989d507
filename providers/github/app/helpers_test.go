package app

import (
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
