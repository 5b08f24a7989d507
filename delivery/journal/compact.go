package journal

import (
	"errors"
	"strings"
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
}

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
