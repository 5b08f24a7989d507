package tasks

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// Server runs Asynq's workers for wakegate: pushes, hold releases and
// (Handle) escalation timers, on the push queues of this deployment's
// prefix, all with the same priority: the configured ones and any other
// that Asynq knows (KnownQueues, read at Run). Delayed tasks are checked
// every second and an idle queue every 100 ms (docs/design.md §8: timers
// within ±2 s).
type Server struct {
	rdb    redis.UniversalClient
	p      *Pusher
	config asynq.Config
	mux    *asynq.ServeMux
}

// NewServer returns the Asynq server of one worker process.
func NewServer(rdb redis.UniversalClient, p *Pusher, rel *Releaser, log *slog.Logger) *Server {
	mux := asynq.NewServeMux()
	mux.Handle(TypeDeliver, p)
	mux.Handle(TypeRelease, rel)
	config := asynq.Config{
		Concurrency:              64, // pushes wait on the network, not the CPU
		DelayedTaskCheckInterval: time.Second,
		TaskCheckInterval:        100 * time.Millisecond, // an idle worker polls every 50–150 ms (one small script): a lone push or due timer waits at most that
		RetryDelayFunc:           p.RetryDelay,
		IsFailure:                IsFailure,
		ShutdownTimeout:          15 * time.Second, // an attempt's 10 s timeout and some
		Logger:                   asynqLogger{log.With("component", "asynq")},
	}
	return &Server{rdb: rdb, p: p, config: config, mux: mux}
}

// Handle registers the handler of one more task type (TypeEscalate) on
// the server's queue. Call it before Run.
func (s *Server) Handle(taskType string, h asynq.Handler) { s.mux.Handle(taskType, h) }

// Run works tasks until ctx is cancelled, then stops taking tasks and
// lets those in flight finish (Asynq requeues what is left after its
// shutdown timeout).
func (s *Server) Run(ctx context.Context) error {
	queues, err := KnownQueues(ctx, s.rdb, s.p.cfg.Prefix, s.p.queues)
	if err != nil { // Redis not answering yet: the configured queues, which is all there are unless their count was lowered
		s.p.log.Warn("push queues: working the configured ones only", "err", err)
		queues = s.p.Queues()
	}
	config := s.config
	config.Queues = make(map[string]int, len(queues))
	for _, q := range queues {
		config.Queues[q] = 1
	}
	srv := asynq.NewServerFromRedisClient(s.rdb, config)
	if err := srv.Start(s.mux); err != nil {
		return fmt.Errorf("start asynq: %w", err)
	}
	<-ctx.Done()
	srv.Shutdown()
	return nil
}

// asynqLogger writes Asynq's logs through slog.
type asynqLogger struct{ log *slog.Logger }

func (l asynqLogger) Debug(args ...any) { l.log.Debug(fmt.Sprint(args...)) }
func (l asynqLogger) Info(args ...any)  { l.log.Info(fmt.Sprint(args...)) }
func (l asynqLogger) Warn(args ...any)  { l.log.Warn(fmt.Sprint(args...)) }
func (l asynqLogger) Error(args ...any) { l.log.Error(fmt.Sprint(args...)) }
func (l asynqLogger) Fatal(args ...any) {
	l.log.Error(fmt.Sprint(args...))
	os.Exit(1)
}
