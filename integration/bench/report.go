package bench

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Report is everything one bench run measured.
type Report struct {
	Scenario string    `json:"scenario"`
	Command  string    `json:"command"`
	Date     time.Time `json:"date"`
	Machine  Machine   `json:"machine"`
	Setup    string    `json:"setup"`
	// Phases are the load loops in the order they ran (the baseline first).
	Phases []Result `json:"phases"`
	// Wake is fact → wake latency as supervisors' long-polls saw it.
	Wake *WakeStats `json:"wake,omitempty"`
	// Check is the delivery ledger read against what the tool sent.
	Check *Check `json:"check,omitempty"`
	// Rows are the figures with a target (docs/bench/performance.json's shape).
	Rows  []Row    `json:"rows"`
	Notes []string `json:"notes,omitempty"`
}

// Machine is where the run ran; the load average is the neighbours' noise.
type Machine struct {
	CPUs      int    `json:"cpus"`
	Go        string `json:"go"`
	LoadStart string `json:"load_start"`
	LoadEnd   string `json:"load_end"`
}

// WakeStats is fact → wake latency: from a fact's intended send time to
// the moment a supervisor's long-poll returned it.
type WakeStats struct {
	Expected int       `json:"expected"`
	Seen     int       `json:"seen"`
	Latency  Quantiles `json:"latency"`
	// PerSupervisor is wakes seen per supervisor: min, mean, max.
	PerSupervisor [3]float64 `json:"per_supervisor"`
	Series        []Second   `json:"series,omitempty"`
}

// Row is one figure against its target, as docs/bench/performance.json holds it.
type Row struct {
	Target   string   `json:"target"`
	Value    float64  `json:"value"`
	Unit     string   `json:"unit"`
	Baseline *float64 `json:"baseline"`
	Ratio    *float64 `json:"ratio"`
	Pass     *bool    `json:"pass,omitempty"`
	Command  string   `json:"command"`
	Date     string   `json:"date"`
}

func (r *Report) row(target string, value float64, unit string, baseline, ratio float64, pass *bool) {
	row := Row{Target: target, Value: round3(value), Unit: unit, Pass: pass, Command: r.Command, Date: r.Date.Format(time.DateOnly)}
	if baseline != 0 {
		b := round3(baseline)
		row.Baseline = &b
	}
	if ratio != 0 && !math.IsNaN(ratio) && !math.IsInf(ratio, 0) {
		q := round3(ratio)
		row.Ratio = &q
	}
	r.Rows = append(r.Rows, row)
}

func verdict(ok bool) *bool { return &ok }

func round3(f float64) float64 {
	if f == 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return f
	}
	mag := math.Pow(10, 3-math.Ceil(math.Log10(math.Abs(f))))
	if mag < 1 {
		return math.Round(f)
	}
	return math.Round(f*mag) / mag
}

// Passed says whether every row with a target met it.
func (r *Report) Passed() bool {
	for _, row := range r.Rows {
		if row.Pass != nil && !*row.Pass {
			return false
		}
	}
	return true
}

func newMachine() Machine {
	return Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), LoadStart: loadAvg()}
}

// loadAvg is the 1-minute load average (the machine may be shared).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

// WriteText prints the summary a person reads.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "\nwakegate bench %s — %s\n", r.Scenario, r.Date.Format(time.RFC3339))
	fmt.Fprintf(w, "%s; %d CPUs, %s; load average %s → %s\n\n", r.Setup, r.Machine.CPUs, r.Machine.Go, r.Machine.LoadStart, r.Machine.LoadEnd)
	fmt.Fprintf(w, "%-30s %9s %9s %8s %8s %8s %8s %8s %9s %s\n", "phase", "offered/s", "done/s", "p50", "p90", "p99", "max", "errors", "CPU/op", "")
	for _, p := range r.Phases {
		offered := "max"
		if p.Offered > 0 {
			offered = rate(p.Offered)
		}
		errs := 0
		for _, n := range p.Errors {
			errs += n
		}
		cpu := ""
		if p.CPUPerOp > 0 {
			cpu = fmt.Sprintf("%.0fµs", float64(p.CPUPerOp)/float64(time.Microsecond))
		}
		conns := fmt.Sprintf("(%d conns)", p.Conns)
		fmt.Fprintf(w, "%-30s %9s %9s %8s %8s %8s %8s %8d %9s %s\n", p.Name, offered, rate(p.Achieved),
			ms(p.Latency.P50), ms(p.Latency.P90), ms(p.Latency.P99), ms(p.Latency.Max), errs, cpu, conns)
	}
	for _, p := range r.Phases {
		if len(p.Errors) == 0 {
			continue
		}
		kinds := make([]string, 0, len(p.Errors))
		for k, n := range p.Errors {
			kinds = append(kinds, fmt.Sprintf("%s ×%d", k, n))
		}
		sort.Strings(kinds)
		fmt.Fprintf(w, "  errors of %s: %s\n", p.Name, strings.Join(kinds, ", "))
	}
	for _, p := range r.Phases {
		if len(p.CPUByProcess) == 0 {
			continue
		}
		names := make([]string, 0, len(p.CPUByProcess))
		for k := range p.CPUByProcess {
			names = append(names, k)
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, k := range names {
			parts[i] = fmt.Sprintf("%s %.0fµs", k, float64(p.CPUByProcess[k])/float64(time.Microsecond))
		}
		fmt.Fprintf(w, "  CPU per request of %s: %s\n", p.Name, strings.Join(parts, ", "))
	}
	if wk := r.Wake; wk != nil {
		fmt.Fprintf(w, "\nfact → wake (long-poll): seen %d of %d; p50 %s p90 %s p99 %s max %s; wakes per supervisor min %.0f mean %.1f max %.0f\n",
			wk.Seen, wk.Expected, ms(wk.Latency.P50), ms(wk.Latency.P90), ms(wk.Latency.P99), ms(wk.Latency.Max),
			wk.PerSupervisor[0], wk.PerSupervisor[1], wk.PerSupervisor[2])
	}
	if c := r.Check; c != nil {
		fmt.Fprintf(w, "\n%s\n", c)
	}
	if len(r.Rows) > 0 {
		fmt.Fprintf(w, "\n%-6s %-72s %12s %12s %8s\n", "", "target", "value", "baseline", "ratio")
		for _, row := range r.Rows {
			mark := "      "
			if row.Pass != nil {
				mark = map[bool]string{true: "PASS  ", false: "FAIL  "}[*row.Pass]
			}
			base, ratio := "", ""
			if row.Baseline != nil {
				base = fmt.Sprint(*row.Baseline)
			}
			if row.Ratio != nil {
				ratio = fmt.Sprint(*row.Ratio)
			}
			fmt.Fprintf(w, "%s %-72s %12s %12s %8s\n", mark, clip(row.Target, 72), fmt.Sprint(row.Value)+" "+row.Unit, base, ratio)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\nnote: %s\n", n)
	}
}

// rate prints a per-second figure: whole above 10, else 2 significant digits.
func rate(f float64) string {
	if f >= 10 {
		return fmt.Sprintf("%.0f", f)
	}
	return fmt.Sprintf("%.2g", f)
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func ms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

// WriteJSON writes the report as JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(r)
}

// WriteHTML writes a self-contained page charting each phase's latency
// (p50, p99) and completions over time.
func (r *Report) WriteHTML(w io.Writer) error {
	type chart struct {
		Title    string
		P50, P99 string // SVG polyline points
		Done     string
		MaxMS    float64
		MaxDone  int
		Seconds  int
	}
	var charts []chart
	add := func(title string, series []Second) {
		if len(series) == 0 {
			return
		}
		c := chart{Title: title, Seconds: series[len(series)-1].At + 1}
		for _, s := range series {
			c.MaxMS = math.Max(c.MaxMS, float64(s.P99)/float64(time.Millisecond))
			c.MaxDone = max(c.MaxDone, s.Done)
		}
		c.MaxMS = math.Max(c.MaxMS, 1)
		x := func(t int) float64 { return 50 + 900*float64(t)/float64(max(c.Seconds-1, 1)) }
		y := func(v, top float64) float64 { return 270 - 250*v/top }
		var p50, p99, done []string
		for _, s := range series {
			p50 = append(p50, fmt.Sprintf("%.1f,%.1f", x(s.At), y(float64(s.P50)/float64(time.Millisecond), c.MaxMS)))
			p99 = append(p99, fmt.Sprintf("%.1f,%.1f", x(s.At), y(float64(s.P99)/float64(time.Millisecond), c.MaxMS)))
			done = append(done, fmt.Sprintf("%.1f,%.1f", x(s.At), y(float64(s.Done), float64(max(c.MaxDone, 1)))))
		}
		c.P50, c.P99, c.Done = strings.Join(p50, " "), strings.Join(p99, " "), strings.Join(done, " ")
		charts = append(charts, c)
	}
	for _, p := range r.Phases {
		add(p.Name+": request latency from the intended send time", p.Series)
	}
	if r.Wake != nil {
		add("fact → wake seen by a supervisor's long-poll", r.Wake.Series)
	}
	return htmlPage.Execute(w, map[string]any{"R": r, "Charts": charts})
}

var htmlPage = template.Must(template.New("bench").Funcs(template.FuncMap{"ms": ms, "rate": rate, "deref": func(b *bool) bool { return *b }}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>wakegate bench {{.R.Scenario}}</title>
<style>body{font-family:sans-serif;margin:2em;max-width:1000px}svg{background:#fafafa;border:1px solid #ddd}
td,th{padding:2px 8px;text-align:right}th{background:#eee}.l{text-align:left}</style></head><body>
<h1>wakegate bench {{.R.Scenario}}</h1>
<p>{{.R.Date.Format "2006-01-02 15:04:05 MST"}} · {{.R.Setup}} · {{.R.Machine.CPUs}} CPUs · load average {{.R.Machine.LoadStart}} → {{.R.Machine.LoadEnd}}</p>
<p><code>{{.R.Command}}</code></p>
<table><tr><th class="l">phase</th><th>offered/s</th><th>done/s</th><th>p50</th><th>p90</th><th>p99</th><th>max</th></tr>
{{range .R.Phases}}<tr><td class="l">{{.Name}}</td><td>{{if .Offered}}{{rate .Offered}}{{else}}max{{end}}</td><td>{{rate .Achieved}}</td>
<td>{{ms .Latency.P50}}</td><td>{{ms .Latency.P90}}</td><td>{{ms .Latency.P99}}</td><td>{{ms .Latency.Max}}</td></tr>{{end}}</table>
<table><tr><th class="l">target</th><th>value</th><th>baseline</th><th>ratio</th><th>verdict</th></tr>
{{range .R.Rows}}<tr><td class="l">{{.Target}}</td><td>{{.Value}} {{.Unit}}</td><td>{{if .Baseline}}{{.Baseline}}{{end}}</td><td>{{if .Ratio}}{{.Ratio}}{{end}}</td><td>{{if .Pass}}{{if deref .Pass}}PASS{{else}}FAIL{{end}}{{end}}</td></tr>{{end}}</table>
{{range .Charts}}<h3>{{.Title}}</h3>
<svg width="1000" height="300" viewBox="0 0 1000 300">
<polyline fill="none" stroke="#9ecae1" stroke-width="1.5" points="{{.Done}}"/>
<polyline fill="none" stroke="#3182bd" stroke-width="2" points="{{.P50}}"/>
<polyline fill="none" stroke="#e6550d" stroke-width="2" points="{{.P99}}"/>
<text x="52" y="16" font-size="12">top: {{printf "%.1f" .MaxMS}} ms (p50 blue, p99 orange) · {{.MaxDone}}/s completed (light blue) · {{.Seconds}} s</text>
<line x1="50" y1="270" x2="950" y2="270" stroke="#999"/></svg>{{end}}
</body></html>
`))
