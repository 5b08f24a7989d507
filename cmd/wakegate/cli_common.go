package main

// What the client commands share (events tail, inbox, quiet, health,
// brief, subscribe, subscriptions, unsubscribe, wait): the gateway and
// token from WAKEGATE_URL / WAKEGATE_TOKEN (flags win), exit codes, and
// output — aligned tables a person reads, colour only on a terminal and
// never with NO_COLOR, --json for scripts.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wakegate/wakegate/providers/agent/client"
)

// Exit codes of the client commands.
const (
	exitOK      = 0
	exitError   = 1 // the gateway refused, could not be reached, or answered badly
	exitUsage   = 2 // bad flags or arguments
	exitSilence = 3 // wakegate wait: the deadline passed with nothing matching
)

// defaultURL is where the CLI finds the gateway without WAKEGATE_URL.
const defaultURL = "http://127.0.0.1:8080"

const exitCodesHelp = `
Environment:
  WAKEGATE_URL    the gateway (default ` + defaultURL + `); --url wins
  WAKEGATE_TOKEN  the bearer token (wakegate token, or a child token); --token wins
  NO_COLOR        set: no colour even on a terminal

Exit codes: 0 ok · 1 error (refused, unreachable) · 2 usage`

// cli is what a client command runs with.
type cli struct {
	ctx            context.Context
	getenv         func(string) string
	stdout, stderr io.Writer
	color          bool // stdout is a terminal and NO_COLOR is unset
}

// useColor: colour only on a terminal, never with NO_COLOR (any value)
// or TERM=dumb.
func useColor(tty bool, getenv func(string) string) bool {
	return tty && getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
}

// usageError is a bad flag or argument: exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// exitCodeError ends a command with a given exit code and message (the
// message may be empty: nothing more to say).
type exitCodeError struct {
	code int
	msg  string
}

func (e exitCodeError) Error() string { return e.msg }

// clientCommands are the subcommands that speak to a gateway.
var clientCommands = map[string]func(c *cli, args []string) error{
	"events":        runEvents,
	"inbox":         runInbox,
	"quiet":         runQuiet,
	"health":        runHealth,
	"brief":         runBrief,
	"subscribe":     runSubscribe,
	"subscriptions": runSubscriptions,
	"unsubscribe":   runUnsubscribe,
	"wait":          runWait,
	"redeliver":     runRedeliver, // cli_redeliver.go
}

// runClientCommand runs one client command and turns its outcome into the
// documented exit code, with at most one line on stderr for an error.
func runClientCommand(ctx context.Context, name string, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	run, ok := clientCommands[name]
	if !ok {
		fmt.Fprintf(stderr, "wakegate: unknown command %q\n", name)
		return exitUsage
	}
	f, ok := stdout.(*os.File)
	c := &cli{ctx: ctx, getenv: getenv, stdout: stdout, stderr: stderr, color: useColor(ok && isTerminal(f), getenv)}
	err := run(c, args)
	var ue usageError
	var ce exitCodeError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "wakegate %s: %s (see wakegate %s --help)\n", name, ue.msg, name)
		return exitUsage
	case errors.As(err, &ce):
		if ce.msg != "" {
			fmt.Fprintf(stderr, "wakegate %s: %s\n", name, ce.msg)
		}
		return ce.code
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return exitOK // interrupted (Ctrl-C while following or waiting)
	default:
		fmt.Fprintf(stderr, "wakegate %s: %s\n", name, describe(err))
		return exitError
	}
}

// describe says what went wrong in one line a person can act on.
func describe(err error) string {
	var pe *client.Error
	var te *client.TransportError
	switch {
	case errors.As(err, &pe):
		msg := fmt.Sprintf("%d %s", pe.Status, pe.Title)
		if pe.Detail != "" {
			msg += ": " + pe.Detail
		}
		if pe.Holder != "" {
			msg += " (held by " + pe.Holder + ")"
		}
		switch pe.Status {
		case 401:
			msg += " — check WAKEGATE_TOKEN"
		case 403:
			msg += " — the token lacks a scope this needs"
		}
		return msg
	case errors.As(err, &te):
		return fmt.Sprintf("gateway unreachable: %v — is it running at WAKEGATE_URL?", te.Err)
	}
	return err.Error()
}

// apiFlags are the flags every client command has.
type apiFlags struct {
	url, token string
	json       bool
}

func addAPIFlags(fs *flag.FlagSet) *apiFlags {
	a := &apiFlags{}
	fs.StringVar(&a.url, "url", "", "the gateway's base URL (default $WAKEGATE_URL, else "+defaultURL+")")
	fs.StringVar(&a.token, "token", "", "bearer token (default $WAKEGATE_TOKEN)")
	fs.BoolVar(&a.json, "json", false, "print JSON for scripts instead of a table")
	return a
}

// client builds the API client from the flags, else the environment.
func (c *cli) client(a *apiFlags, opts ...client.Option) (*client.Client, error) {
	u := a.url
	if u == "" {
		u = c.getenv("WAKEGATE_URL")
	}
	if u == "" {
		u = defaultURL
	}
	tok := a.token
	if tok == "" {
		tok = c.getenv("WAKEGATE_TOKEN")
	}
	if tok == "" {
		return nil, usagef("no token: set WAKEGATE_TOKEN or pass --token")
	}
	cl, err := client.New(u, tok, opts...)
	if err != nil {
		return nil, usageError{err.Error()}
	}
	return cl, nil
}

// newFlags returns a flag set whose errors and help go to stderr, with a
// usage text: synopsis, description, flags, environment and exit codes.
func (c *cli) newFlags(name, synopsis, about, exits string) *flag.FlagSet {
	fs := flag.NewFlagSet("wakegate "+name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "Usage: %s\n\n%s\n\nFlags:\n", synopsis, strings.TrimSpace(about))
		fs.PrintDefaults()
		if exits == "" {
			exits = exitCodesHelp
		}
		fmt.Fprintln(c.stderr, exits)
	}
	return fs
}

// parse parses flags and positional arguments in any order (flags may
// follow them: wakegate unsubscribe ID --json). A bad flag is a usage
// error; --help is flag.ErrHelp.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, exitCodeError{code: exitUsage} // the flag package printed why, and the usage
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// parseFlags parses the flags of a command that takes no argument.
func parseFlags(fs *flag.FlagSet, args []string) error {
	pos, err := parse(fs, args)
	if err == nil && len(pos) > 0 {
		err = usagef("unexpected argument %q", pos[0])
	}
	return err
}

// splitList reads a comma-separated flag value.
func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// listFlag is a flag that may be repeated and takes comma-separated values.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	*l = append(*l, splitList(v)...)
	return nil
}

// printJSON writes v as one line of JSON.
func (c *cli) printJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.stdout, "%s\n", b)
	return err
}

// Colours (ANSI SGR), used only when cli.color is set.
const (
	sgrReset  = "\x1b[0m"
	sgrBold   = "\x1b[1m"
	sgrDim    = "\x1b[2m"
	sgrRed    = "\x1b[31m"
	sgrYellow = "\x1b[33m"
	sgrGreen  = "\x1b[32m"
)

// paint wraps s in an SGR sequence when colour is on.
func (c *cli) paint(sgr, s string) string {
	if !c.color || sgr == "" || s == "" {
		return s
	}
	return sgr + s + sgrReset
}

// priorityColor is how a priority is shown.
func priorityColor(p string) string {
	switch p {
	case "critical":
		return sgrRed + sgrBold
	case "attention":
		return sgrYellow
	case "info":
		return sgrDim
	}
	return ""
}

// cell is a table cell: its text and an optional colour.
type cell struct {
	text, sgr string
}

func plain(s string) cell { return cell{text: s} }

// table renders aligned columns (two spaces apart; the last column is not
// padded). Widths are measured on the text alone, so colours never shift
// a column.
type table struct {
	head []string
	rows [][]cell
}

func (t *table) add(cells ...cell) { t.rows = append(t.rows, cells) }

func (t *table) render(c *cli) {
	widths := make([]int, len(t.head))
	for i, h := range t.head {
		widths[i] = utf8.RuneCountInString(h)
	}
	for _, r := range t.rows {
		for i, cl := range r {
			if i < len(widths) {
				widths[i] = max(widths[i], utf8.RuneCountInString(cl.text))
			}
		}
	}
	line := func(cells []cell) {
		var b strings.Builder
		for i, cl := range cells {
			b.WriteString(c.paint(cl.sgr, cl.text))
			if i < len(cells)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cl.text)+2))
			}
		}
		fmt.Fprintln(c.stdout, strings.TrimRight(b.String(), " "))
	}
	head := make([]cell, len(t.head))
	for i, h := range t.head {
		head[i] = cell{text: h, sgr: sgrBold}
	}
	line(head)
	for _, r := range t.rows {
		line(r)
	}
}

// truncate shortens s to n runes with an ellipsis, on one line.
func truncate(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// age is how long ago t was, compactly: 12s, 5m, 3h, 2d.
func age(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

// stamp formats a time for a table: UTC, to the second.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// parseUntil reads an until flag: a duration from now (2h) or an RFC 3339
// time.
func parseUntil(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d <= 0 {
			return time.Time{}, usagef("--until %s must be in the future", v)
		}
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, usagef("--until %q must be a duration (2h) or an RFC 3339 time", v)
	}
	return t, nil
}
