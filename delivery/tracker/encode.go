package tracker

import (
	"strconv"

	"github.com/wakegate/wakegate/providers/event"
)

// appendInput appends in as JSON, as json.Marshal would encode it without
// its context (the batch passes the context beside it, apply_batch.lua):
// the same fields and values, decoded alike by cjson, without reflection
// (json.Marshal was a third of the batch's Go cost before the script
// call). ok is false when in has a context; the caller then marshals it.
func appendInput(b []byte, in *applyInput) (_ []byte, ok bool) {
	if in.scriptCtx.NowMS != 0 || in.NowTime != "" || in.SettleMS != 0 || in.Retention != 0 || in.Req != nil {
		return b, false
	}
	b = append(b, `{"workspace":`...)
	b = appendString(b, in.Workspace)
	b = appendField(b, "repo", in.Repo)
	b = appendField(b, "guid", in.GUID)
	b = appendField(b, "source", in.Source)
	b = appendField(b, "type", in.Type)
	b = appendField(b, "subject", in.Subject)
	b = appendField(b, "id", in.ID)
	b = appendOmit(b, "time", in.Time)
	b = appendOmit(b, "priority", in.Priority)
	b = appendOmit(b, "coalescekey", in.CoalesceKey)
	if in.Terminal {
		b = append(b, `,"terminal":true`...)
	}
	b = appendOmit(b, "summary", in.Summary)
	if in.EvAt != 0 {
		b = appendInt(b, "ev_at", int64(in.EvAt))
	}
	b = appendInt(b, "number", int64(in.Number))
	b = appendField(b, "sha_subject", in.ShaSubject)
	b = appendOmit(b, "deploy_sha", in.DeploySHA)
	if p := in.PR; p != nil {
		b = append(b, `,"pr":{"number":`...)
		b = strconv.AppendInt(b, int64(p.Number), 10)
		b = appendField(b, "action", p.Action)
		b = appendField(b, "state", p.State)
		b = appendBool(b, "draft", p.Draft)
		b = appendBool(b, "merged", p.Merged)
		b = appendField(b, "head", p.Head)
		b = appendField(b, "base", p.Base)
		b = appendField(b, "author", p.Author)
		b = appendField(b, "title", p.Title)
		b = appendField(b, "labels", p.Labels)
		b = appendInt(b, "updated_ms", p.UpdatedMS)
		b = appendOmit(b, "trailer", p.Trailer)
		if p.TrailerKnown {
			b = append(b, `,"trailer_known":true`...)
		}
		b = appendField(b, "server_source", p.ServerSource)
		b = append(b, '}')
	}
	if c := in.Check; c != nil {
		b = append(b, `,"check":{"sha":`...)
		b = appendString(b, c.SHA)
		b = appendField(b, "name", c.Name)
		b = appendBool(b, "suite", c.Suite)
		b = appendField(b, "result", c.Result)
		b = appendInt(b, "at_ms", c.AtMS)
		if c.PRs == nil {
			b = append(b, `,"prs":null`...)
		} else {
			b = append(b, `,"prs":[`...)
			for i, n := range c.PRs {
				if i > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendInt(b, int64(n), 10)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	if r := in.Review; r != nil {
		b = append(b, `,"review":{"number":`...)
		b = strconv.AppendInt(b, int64(r.Number), 10)
		b = appendField(b, "reviewer", r.Reviewer)
		b = appendField(b, "state", r.State)
		b = appendInt(b, "at_ms", r.AtMS)
		b = append(b, '}')
	}
	return append(b, '}'), true
}

func appendField(b []byte, name, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendString(b, v)
}

func appendOmit(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	return appendField(b, name, v)
}

func appendInt(b []byte, name string, v int64) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, v, 10)
}

func appendBool(b []byte, name string, v bool) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return strconv.AppendBool(b, v)
}

// appendString writes s as a JSON string for the scripts' cjson.
func appendString(b []byte, s string) []byte { return event.AppendString(b, s, false) }
