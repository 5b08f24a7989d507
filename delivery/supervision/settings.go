package supervision

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // quiet_hours.tz must resolve even where the host has no zoneinfo

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/providers/event"
)

// Lease modes: how a control message from a party that does not hold the
// controller lease is treated (docs/design.md §6).
const (
	LeaseOff     = "off"
	LeaseWarn    = "warn"
	LeaseEnforce = "enforce"
)

// Settings are a workspace's supervision settings (GET|PUT
// /v1/workspace/supervision). Their JSON is what an inbox entry snapshots
// when it is created.
type Settings struct {
	DefaultController string      `json:"default_controller,omitempty"` // a party, or none
	Fallback          *Fallback   `json:"fallback,omitempty"`
	EscalateAfter     Duration    `json:"escalate_after"`
	EscalateUnacked   []string    `json:"escalate_unacked"` // priorities (attention, critical) whose unacked entries escalate
	QuietHours        *QuietHours `json:"quiet_hours,omitempty"`
	LeaseMode         string      `json:"lease_mode"` // off | warn | enforce
	Rate              Rate        `json:"rate"`
}

// Fallback is who hears a session event that reaches nobody (docs/design.md §5).
type Fallback struct {
	Party string `json:"party"`
}

// QuietHours is a daily window, in a time zone, during which the workspace
// is quiet. A window whose end is before its start spans midnight.
type QuietHours struct {
	Start string `json:"start"` // HH:MM
	End   string `json:"end"`   // HH:MM
	TZ    string `json:"tz"`    // IANA time zone, e.g. Europe/Berlin
}

// Rate caps wakes: at most Burst per Per.
type Rate struct {
	Per   Duration `json:"per"`
	Burst int      `json:"burst"`
}

// Duration is a time.Duration written as a Go duration string ("2m",
// "1h30m") in JSON.
type Duration time.Duration

// MarshalJSON writes the shortest form: "2m", "1h30m", "45s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// String is the duration without zero trailing units ("2m", not "2m0s").
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`must be a duration string such as "2m"`)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf(`%q is not a duration such as "2m"`, s)
	}
	*d = Duration(v)
	return nil
}

// Defaults (docs/design.md §6): no default controller, no fallback, escalate_after
// 2m, escalate_unacked none, no quiet hours, lease_mode off, rate 3 per 30s.
func Defaults() Settings {
	return Settings{
		EscalateAfter:   Duration(2 * time.Minute),
		EscalateUnacked: []string{},
		LeaseMode:       LeaseOff,
		Rate:            Rate{Per: Duration(30 * time.Second), Burst: 3},
	}
}

// MaxBurst caps rate.burst.
const MaxBurst = 10_000

// Settings returns a workspace's settings: the defaults overlaid with what
// an admin has set.
func (s *Store) Settings(ctx context.Context, workspace string) (Settings, error) {
	if !event.ValidWorkspace(workspace) {
		return Settings{}, invalid("workspace %q", workspace)
	}
	return settingsFrom(s.rdb.Get(ctx, s.settingsKey(workspace)))
}

// QueueSettings queues the read of Settings on p (a pipeline, so that a
// caller reads several things in one round trip); the func it returns
// answers as Settings once p has run.
func (s *Store) QueueSettings(ctx context.Context, p redis.Pipeliner, workspace string) func() (Settings, error) {
	if !event.ValidWorkspace(workspace) {
		return func() (Settings, error) { return Settings{}, invalid("workspace %q", workspace) }
	}
	cmd := p.Get(ctx, s.settingsKey(workspace))
	return func() (Settings, error) { return settingsFrom(cmd) }
}

func settingsFrom(cmd *redis.StringCmd) (Settings, error) {
	raw, err := cmd.Result()
	if errors.Is(err, redis.Nil) {
		return Defaults(), nil
	}
	if err != nil {
		return Settings{}, storage("supervision settings", err)
	}
	decodedMu.Lock()
	st, ok := decoded[raw]
	decodedMu.Unlock()
	if ok {
		return st.clone(), nil
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		return Settings{}, storage("supervision settings", err)
	}
	if st, err = build(doc); err != nil {
		return Settings{}, storage("stored supervision settings", err)
	}
	decodedMu.Lock()
	if len(decoded) >= 1024 {
		clear(decoded)
	}
	decoded[raw] = st
	decodedMu.Unlock()
	return st.clone(), nil
}

// decoded remembers the settings decoded from a stored document (the
// router reads them for every event; decoding and validating the
// document cost more than the read).
var (
	decodedMu sync.Mutex
	decoded   = map[string]Settings{}
)

// clone copies s deeply enough that a caller may change the copy.
func (s Settings) clone() Settings {
	if s.Fallback != nil {
		f := *s.Fallback
		s.Fallback = &f
	}
	if s.QuietHours != nil {
		q := *s.QuietHours
		s.QuietHours = &q
	}
	s.EscalateUnacked = slices.Clone(s.EscalateUnacked)
	return s
}

// setScript replaces the stored settings if nobody changed them meanwhile.
// Its KEYS, ARGV and reply are in set.lua.
//
//go:embed set.lua
var setLua string

var setScript = keyspace.NewScript("delivery/supervision/set.lua", setLua)

// MergeSettings applies a PUT: the fields present in patch replace the
// stored ones (a JSON merge patch, RFC 7396: objects merge field by field,
// null resets a field to its default). The result is validated as a whole
// — durations at least 1s, parties valid, quiet_hours HH:MM in an IANA time
// zone — and a refused patch applies nothing (ErrInvalid, naming the
// field). It returns the new effective settings.
func (s *Store) MergeSettings(ctx context.Context, workspace string, patch []byte) (Settings, error) {
	if !event.ValidWorkspace(workspace) {
		return Settings{}, invalid("workspace %q", workspace)
	}
	var p map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(patch))
	if err := dec.Decode(&p); err != nil || p == nil || dec.More() {
		return Settings{}, invalid("body must be one JSON object")
	}
	key := s.settingsKey(workspace)
	for range 8 {
		raw, err := s.rdb.Get(ctx, key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return Settings{}, storage("supervision settings", err)
		}
		doc := map[string]json.RawMessage{}
		if raw != "" {
			if err := json.Unmarshal([]byte(raw), &doc); err != nil {
				return Settings{}, storage("stored supervision settings", err)
			}
		}
		merged, err := mergePatch(doc, p)
		if err != nil {
			return Settings{}, err
		}
		st, err := build(merged)
		if err != nil {
			return Settings{}, err
		}
		next, err := json.Marshal(merged)
		if err != nil {
			return Settings{}, storage("supervision settings", err)
		}
		ok, err := setScript.Run(ctx, s.rdb, []string{key}, raw, next).Int()
		if err != nil {
			return Settings{}, storage("supervision settings", err)
		}
		if ok == 1 {
			return st, nil
		}
	}
	return Settings{}, storage("supervision settings", errors.New("contended; retry"))
}

// mergePatch applies an RFC 7396 merge patch to the stored document.
func mergePatch(doc, patch map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(doc)+len(patch))
	for k, v := range doc {
		out[k] = v
	}
	for k, v := range patch {
		if _, known := fields[k]; !known {
			return nil, invalid("unknown field %q", k)
		}
		v = bytes.TrimSpace(v)
		if bytes.Equal(v, []byte("null")) {
			delete(out, k)
			continue
		}
		if sub, isObj := object(v); isObj {
			if cur, ok := object(out[k]); ok {
				for sk, sv := range sub {
					if bytes.Equal(bytes.TrimSpace(sv), []byte("null")) {
						delete(cur, sk)
					} else {
						cur[sk] = sv
					}
				}
				b, err := json.Marshal(cur)
				if err != nil {
					return nil, invalid("%s: %v", k, err)
				}
				out[k] = b
				continue
			}
		}
		out[k] = v
	}
	return out, nil
}

func object(v json.RawMessage) (map[string]json.RawMessage, bool) {
	if len(v) == 0 || v[0] != '{' {
		return nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(v, &m) != nil {
		return nil, false
	}
	return m, true
}

// fields are the settings a PUT may name, each with how it is applied.
var fields = map[string]func(st *Settings, v json.RawMessage) error{
	"default_controller": func(st *Settings, v json.RawMessage) error {
		var p string
		if err := json.Unmarshal(v, &p); err != nil {
			return errors.New("must be a party string")
		}
		if p != "" {
			if _, err := event.ParseParty(p); err != nil {
				return err
			}
		}
		st.DefaultController = p
		return nil
	},
	"fallback": func(st *Settings, v json.RawMessage) error {
		var f Fallback
		if err := strict(v, &f); err != nil {
			return err
		}
		if _, err := event.ParseParty(f.Party); err != nil {
			return fmt.Errorf("party: %w", err)
		}
		st.Fallback = &f
		return nil
	},
	"escalate_after": func(st *Settings, v json.RawMessage) error {
		var d Duration
		if err := json.Unmarshal(v, &d); err != nil {
			return err
		}
		if time.Duration(d) < time.Second {
			return fmt.Errorf("%s is under 1s", time.Duration(d))
		}
		st.EscalateAfter = d
		return nil
	},
	"escalate_unacked": func(st *Settings, v json.RawMessage) error {
		var ps []string
		if err := json.Unmarshal(v, &ps); err != nil {
			return errors.New(`must be a list of priorities, e.g. ["critical"]`)
		}
		out := []string{}
		for _, p := range ps {
			if p != string(event.Attention) && p != string(event.Critical) {
				return fmt.Errorf("%q must be attention or critical", p)
			}
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
		st.EscalateUnacked = out
		return nil
	},
	"quiet_hours": func(st *Settings, v json.RawMessage) error {
		var q QuietHours
		if err := strict(v, &q); err != nil {
			return err
		}
		if err := q.validate(); err != nil {
			return err
		}
		st.QuietHours = &q
		return nil
	},
	"lease_mode": func(st *Settings, v json.RawMessage) error {
		var m string
		_ = json.Unmarshal(v, &m)
		if m != LeaseOff && m != LeaseWarn && m != LeaseEnforce {
			return errors.New("must be off, warn or enforce")
		}
		st.LeaseMode = m
		return nil
	},
	"rate": func(st *Settings, v json.RawMessage) error {
		r := st.Rate
		if err := strict(v, &r); err != nil {
			return err
		}
		if time.Duration(r.Per) < time.Second {
			return fmt.Errorf("per: %s is under 1s", time.Duration(r.Per))
		}
		if r.Burst < 1 || r.Burst > MaxBurst {
			return fmt.Errorf("burst: %d must be 1 to %d", r.Burst, MaxBurst)
		}
		st.Rate = r
		return nil
	},
}

// strict decodes an object refusing unknown fields, naming the field at fault.
func strict(v json.RawMessage, into any) error {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("%s must be %s", te.Field, te.Type)
		}
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// build applies a settings document over the defaults, validating each
// field; an error names the field.
func build(doc map[string]json.RawMessage) (Settings, error) {
	st := Defaults()
	names := make([]string, 0, len(doc))
	for k := range doc {
		names = append(names, k)
	}
	slices.Sort(names) // the first error reported is deterministic
	for _, k := range names {
		apply, ok := fields[k]
		if !ok {
			return Settings{}, invalid("unknown field %q", k)
		}
		if err := apply(&st, doc[k]); err != nil {
			return Settings{}, invalid("%s: %v", k, err)
		}
	}
	return st, nil
}

var hhmm = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9]$`)

func (q *QuietHours) validate() error {
	if !hhmm.MatchString(q.Start) {
		return fmt.Errorf("start %q must be HH:MM", q.Start)
	}
	if !hhmm.MatchString(q.End) {
		return fmt.Errorf("end %q must be HH:MM", q.End)
	}
	if q.Start == q.End {
		return errors.New("start and end must differ")
	}
	if q.TZ == "" || q.TZ == "Local" {
		return errors.New("tz must name an IANA time zone, e.g. Europe/Berlin")
	}
	if _, err := time.LoadLocation(q.TZ); err != nil {
		return fmt.Errorf("tz %q is not an IANA time zone", q.TZ)
	}
	return nil
}

func minutes(hm string) int {
	return int(hm[0]-'0')*600 + int(hm[1]-'0')*60 + int(hm[3]-'0')*10 + int(hm[4]-'0')
}
