package apptest

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// LogBuffer collects JSON logs, safe for concurrent writers.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// NewLog is a debug-level JSON logger writing into the returned buffer.
func NewLog() (*slog.Logger, *LogBuffer) {
	buf := &LogBuffer{}
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// AssertNoSecrets fails when the logs carry the App key or any JWT or
// token the fake saw or issued.
func AssertNoSecrets(t *testing.T, logs string, g *GitHub) {
	t.Helper()
	_, pem := Key()
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
