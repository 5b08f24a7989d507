package bench

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Baseline is the bare ingest handler every throughput is compared with
// (the bare floor handler): read the body, verify its HMAC, one XADD of the raw body —
// nothing else. It runs in its own process, as a gateway does
// (`wakegate bench baseline-server`, started by the run).
type Baseline struct {
	rdb    redis.UniversalClient
	stream string
	secret []byte
}

func (h *Baseline) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/readyz" {
		_, _ = io.WriteString(w, `{"status":"ready"}`)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 25<<20))
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	got, _ := hex.DecodeString(strings.TrimPrefix(r.Header.Get("X-Hub-Signature-256"), "sha256="))
	m := hmac.New(sha256.New, h.secret)
	m.Write(body)
	if !hmac.Equal(got, m.Sum(nil)) {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2500*time.Millisecond)
	defer cancel()
	// MAXLEN bounds the memory of long runs; it is still one XADD.
	if err := h.rdb.XAdd(ctx, &redis.XAddArgs{Stream: h.stream, MaxLen: 1000, Approx: true, Values: []any{"b", body}}).Err(); err != nil {
		http.Error(w, "storage unavailable", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = io.WriteString(w, `{"status":"accepted"}`)
}

// NewBaseline is the bare handler: bodies signed with secret are added to
// stream.
func NewBaseline(rdb redis.UniversalClient, stream string, secret []byte) *Baseline {
	return &Baseline{rdb: rdb, stream: stream, secret: secret}
}

// ServeBaseline serves the bare handler on addr until ctx ends. The
// environment of a bench process names the Redis, the key prefix and the
// secret, as for a gateway.
func ServeBaseline(ctx context.Context, addr, redisURL, prefix, secret string) error {
	var rdb redis.UniversalClient
	if strings.HasPrefix(redisURL, "redis+cluster://") { // --redis-cluster
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: clusterAddrs(redisURL)})
	} else {
		opt, err := redis.ParseURL(redisURL)
		if err != nil {
			return err
		}
		rdb = redis.NewClient(opt)
	}
	defer rdb.Close()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: NewBaseline(rdb, prefix+":baseline", []byte(secret)), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
