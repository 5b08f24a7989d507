package journal

import (
	"errors"
	"strings"

	"github.com/wakegate/wakegate/providers/event"
)

// compactMark begins a compact entry (docs/design.md §14 "Journal
// entries"), which journal.lua's wg_entry writes for an event about a
// GitHub subject: "\x01", the repository, "\x00", the title as the
// summary's JSON has it ("" for none), "\x00", the head sha ending the
// id ("" for none), "\x00", then the event's JSON in the PR tracker's
// compact form (no specversion, datacontenttype, workspace, nor a
// coalescekey equal to the subject) with these one-byte tokens in it. No valid JSON holds bytes 0x01–0x08, 0x0B, 0x0C or
// 0x0E–0x1F unescaped, so they cannot be the event's own bytes; the
// entries of earlier versions begin with '{'.
const compactMark = 0x01

// Tokens of the compact entry and what they stand for; 0x01–0x04 are the
// sha, the repository (plain, and with '/' escaped as cjson writes it)
// and the title, given by the entry's header. 0x13–0x15 are journal.lua's
// WG_DATA.
var compactTokens = [0x20]string{
	0x05: `{"id":`,
	0x06: `,"source":"//github.com/`, // + the repository + `"`
	0x07: `,"type":"github.pull_request.`,
	0x08: `,"subject":"github:`,
	0x0b: `,"time":"`,
	0x0c: `,"priority":"attention"`,
	0x0e: `,"priority":"info"`,
	0x0f: `,"priority":"critical"`,
	0x10: `,"summary":"`,
	0x11: `,"data":`,
	0x12: `,"type":"github.`,
	0x13: `"url":"https://github.com/`,
	0x14: `"url":"https:\/\/github.com\/`,
	0x15: `"draft":false,"merged":false,"labels":[`,
	// 0x16–0x1d: member names of the data of GitHub pull_request events,
	// written by Entry only (Lua writes none: each costs it a plain find).
	0x16: `{"repo":"`,
	0x17: `","number":`,
	0x18: `,"action":"`,
	0x19: `","title":"`,
	0x1a: `","author":"`,
	0x1b: `","head":"`,
	0x1c: `","base":"`,
	0x1d: `","state":"`,
}

// entryData replaces, in one pass, the runs Entry writes as tokens in an
// event's data after the title, the sha and the repository (no token's
// run holds a control byte, so one pass finds what a pass per token
// would).
var entryData = func() *strings.Replacer {
	var pairs []string
	for c := byte(0x13); c <= 0x1d; c++ {
		pairs = append(pairs, compactTokens[c], string(rune(c)))
	}
	return strings.NewReplacer(pairs...)
}()

var errCompact = errors.New("malformed compact entry")

// expand turns a compact entry back into the JSON it stands for: every
// byte but the tokens is the event's own, so the event's data comes back
// byte for byte.
func expand(raw string) ([]byte, error) {
	repo, rest, ok := strings.Cut(raw[1:], "\x00")
	if !ok {
		return nil, errCompact
	}
	title, rest, ok := strings.Cut(rest, "\x00")
	if !ok {
		return nil, errCompact
	}
	sha, body, ok := strings.Cut(rest, "\x00")
	if !ok {
		return nil, errCompact
	}
	resc := strings.ReplaceAll(repo, "/", `\/`)
	out := make([]byte, 0, len(body)+4*len(repo)+2*len(title)+len(sha)+320)
	for i := 0; i < len(body); {
		// copy the run of plain bytes up to the next token at once
		j := i
		for j < len(body) && (body[j] >= 0x20 || body[j] == '\t' || body[j] == '\n' || body[j] == '\r') {
			j++
		}
		out = append(out, body[i:j]...)
		if j == len(body) {
			break
		}
		switch c := body[j]; c {
		case 0x01:
			out = append(out, sha...)
		case 0x02:
			out = append(out, repo...)
		case 0x03:
			out = append(out, resc...)
		case 0x04:
			out = append(out, title...)
		case 0x06:
			out = append(out, compactTokens[c]...)
			out = append(out, repo...)
			out = append(out, '"')
		default:
			if compactTokens[c] == "" {
				return nil, errCompact
			}
			out = append(out, compactTokens[c]...)
		}
		i = j + 1
	}
	return out, nil
}

// EntryFields is an event as a journaling script's caller builds its
// entry: strings as they are (not JSON-encoded); Data is raw JSON ("" for
// none). No specversion, datacontenttype nor workspace: the reader puts
// them back (decode), and the sessionid is the script's to add.
type EntryFields struct {
	ID, Source, Type, Subject, Time string
	Priority, CoalesceKey, Summary  string
	Terminal                        bool
	Data                            string
}

// Entry renders e as the journal stores it (docs/design.md §14 "Journal
// entries"), as journal.lua's wg_entry would, but in Go, where it costs a
// fraction of what it costs Redis: the compact entry for an event about a
// GitHub subject ("github:<repo>#…" or "github:<repo>@…"), else the
// compact JSON form. sessionAt is where the sessionid member
// (`,"sessionid":"…"`) goes when the script finds one: right after time,
// in either form. The tokens written are those expand reads, including
// 0x16–0x1d, which only this function writes.
func Entry(e EntryFields) (entry string, sessionAt int) {
	repo, ok := subjectRepo(e.Subject)
	if !ok {
		return entryJSON(e)
	}
	var title, sha, summary string
	if e.Summary != "" {
		summary = string(appendJSONString(nil, e.Summary)[1:]) // without its opening quote
		// the title: between the first ": " and the last " (" after it
		if a := strings.Index(summary, ": "); a >= 0 {
			if b := strings.LastIndex(summary[a+1:], " ("); b >= 0 && b+1 > 6 {
				b += a + 1
				title = summary[a+2 : b]
				tail := summary[b:]
				if tail == " ("+repo+`)"` {
					tail = " (\x02)\""
				}
				summary = summary[:a+2] + "\x04" + tail
			}
		}
	}
	id := appendJSONString(nil, e.ID)
	if len(e.ID) >= 40 && isHex(e.ID[len(e.ID)-40:]) {
		sha = e.ID[len(e.ID)-40:]
		p := appendJSONString(nil, e.ID[:len(e.ID)-40])
		id = append(p[:len(p)-1], 0x01, '"')
	}
	b := make([]byte, 0, 128+len(repo)+2*len(title)+len(summary)+len(e.Data))
	b = append(b, compactMark)
	b = append(b, repo...)
	b = append(b, 0)
	b = append(b, title...)
	b = append(b, 0)
	b = append(b, sha...)
	b = append(b, 0, 0x05)
	b = append(b, id...)
	if e.Source == "//github.com/"+repo {
		b = append(b, 0x06)
	} else {
		b = append(b, `,"source":`...)
		b = appendJSONString(b, e.Source)
	}
	if t, ok := strings.CutPrefix(e.Type, "github.pull_request."); ok {
		b = append(b, 0x07)
		b = appendTail(b, t)
	} else if t, ok := strings.CutPrefix(e.Type, "github."); ok {
		b = append(b, 0x12)
		b = appendTail(b, t)
	} else {
		b = append(b, `,"type":`...)
		b = appendJSONString(b, e.Type)
	}
	b = append(b, 0x08, 0x02)
	b = appendTail(b, e.Subject[len("github:")+len(repo):])
	b = append(b, 0x0b)
	b = appendTail(b, e.Time)
	sessionAt = len(b)
	switch e.Priority {
	case "":
	case "attention":
		b = append(b, 0x0c)
	case "info":
		b = append(b, 0x0e)
	case "critical":
		b = append(b, 0x0f)
	default:
		b = append(b, `,"priority":`...)
		b = appendJSONString(b, e.Priority)
	}
	b = appendKeyTerminal(b, e)
	if e.Summary != "" {
		b = append(b, 0x10)
		b = append(b, summary...)
	}
	if e.Data != "" {
		d := e.Data
		d = replaceRun(d, title, "\x04")
		d = replaceRun(d, sha, "\x01")
		d = replaceRun(d, strings.ReplaceAll(repo, "/", `\/`), "\x03")
		d = replaceRun(d, repo, "\x02")
		b = append(b, 0x11)
		b = append(b, entryData.Replace(d)...)
	}
	b = append(b, '}')
	return string(b), sessionAt
}

// appendKeyTerminal appends e's coalescekey (unless it is the subject,
// which the reader puts back) and terminal members, as both forms have
// them.
func appendKeyTerminal(b []byte, e EntryFields) []byte {
	if e.CoalesceKey != "" && e.CoalesceKey != e.Subject {
		b = append(b, `,"coalescekey":`...)
		b = appendJSONString(b, e.CoalesceKey)
	}
	if e.Terminal {
		b = append(b, `,"terminal":true`...)
	}
	return b
}

// replaceRun replaces every old in s by tok; an empty old replaces
// nothing.
func replaceRun(s, old, tok string) string {
	if old == "" {
		return s
	}
	return strings.ReplaceAll(s, old, tok)
}

// subjectRepo is the repository of a subject "github:<repo>" followed by
// '#' or '@' (wg_entry's pattern: letters, digits, '.', '_', '-', '/').
func subjectRepo(subject string) (string, bool) {
	rest, ok := strings.CutPrefix(subject, "github:")
	if !ok {
		return "", false
	}
	for i := 0; i < len(rest); i++ {
		switch c := rest[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-', c == '/':
		case (c == '#' || c == '@') && i > 0:
			return rest[:i], true
		default:
			return "", false
		}
	}
	return "", false
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return true
}

// appendTail appends s as a JSON string without its opening quote.
func appendTail(b []byte, s string) []byte {
	n := len(b)
	b = appendJSONString(b, s)
	return append(b[:n], b[n+1:]...)
}

// entryJSON is the compact JSON form of e (wg_json's).
func entryJSON(e EntryFields) (string, int) {
	b := make([]byte, 0, 256+len(e.Summary)+len(e.Data))
	b = append(b, `{"id":`...)
	b = appendJSONString(b, e.ID)
	b = append(b, `,"source":`...)
	b = appendJSONString(b, e.Source)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, e.Type)
	b = append(b, `,"subject":`...)
	b = appendJSONString(b, e.Subject)
	b = append(b, `,"time":`...)
	b = appendJSONString(b, e.Time)
	at := len(b)
	if e.Priority != "" {
		b = append(b, `,"priority":`...)
		b = appendJSONString(b, e.Priority)
	}
	b = appendKeyTerminal(b, e)
	if e.Summary != "" {
		b = append(b, `,"summary":`...)
		b = appendJSONString(b, e.Summary)
	}
	if e.Data != "" {
		b = append(b, `,"data":`...)
		b = append(b, e.Data...)
	}
	b = append(b, '}')
	return string(b), at
}

// appendJSONString appends s as a JSON string as encoding/json writes it,
// without the HTML escapes.
func appendJSONString(b []byte, s string) []byte { return event.AppendString(b, s, false) }
