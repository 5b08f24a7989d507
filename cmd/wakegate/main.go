// Command wakegate is the whole service in one binary: serve (everything
// in one process), gateway and worker (the split roles), token, the CLI
// for people and agents over the HTTP API, and the harness hook.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

const usage = `wakegate tells supervisors — people, or agents driving agents — what needs them.

Usage:
  wakegate serve     everything in one process (embeds an in-memory Redis when WAKEGATE_REDIS_URL is empty)
  wakegate gateway   the HTTP gateway only (production; run N)
  wakegate worker    the journal consumers and timers only (production; run N)
  wakegate token     print a signed agent token for WAKEGATE_JWT_HS256_SECRET
  wakegate bench     load-test wakegate on Redis: ingest, push, fleet, fanout, subscriptions, soak

Over the HTTP API (WAKEGATE_URL, WAKEGATE_TOKEN):
  wakegate events tail [--follow]   the journal's last events, then new ones
  wakegate inbox [--wait 30s]       your unacked entries; --ack, --ack-through N
  wakegate quiet on|off|status      hold wakes to people and supervisors, lift with one digest
  wakegate health                   the supervision health check (admin)
  wakegate brief                    leases, subscriptions, unacked entries, open decisions
  wakegate subscribe | subscriptions | unsubscribe ID
  wakegate wait --subject S --timeout 30m   park until a matching entry arrives (exit 3: silence)
  wakegate redeliver delivery GUID | event ID --source SRC   re-derive a delivery, deliver an event again (operator)
  wakegate hook <harness-event>     what a harness hook runs; never blocks it (always exit 0)

Run "wakegate <command> --help" for the settings of a command. Every setting is
also an environment variable (WAKEGATE_ADDR ↔ --addr); flags win.
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "serve", "gateway", "worker":
		err = runService(ctx, cmd, rest, stdout, stderr)
	case "token":
		err = runToken(rest, stdout, stderr)
	case "hook":
		return runHook(rest, os.Stdin, os.Getenv, stdout, stderr)
	case "bench":
		return runBench(ctx, rest, stdout, stderr)
	default:
		if _, ok := clientCommands[cmd]; ok {
			return runClientCommand(ctx, cmd, rest, os.Getenv, stdout, stderr)
		}
		fmt.Fprintf(stderr, "wakegate: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "wakegate %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}
