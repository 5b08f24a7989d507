package bench

import (
	"context"
	"fmt"
	"time"
)

// runScaling runs the scenario against 1 and 2 gateways and 1 and 2
// workers on one Redis and sets the results side by side: each
// configuration's phases and figures, and its headline figure (the
// scenario's first) as a ratio to one gateway and one worker.
func runScaling(ctx context.Context, o Options, sc *scenario) (*Report, error) {
	rep := &Report{Scenario: o.Scenario + " (scaling)", Command: o.Command, Date: time.Now().UTC(), Machine: newMachine()}
	var first, firstCPU float64
	for _, cfg := range [][2]int{{1, 1}, {1, 2}, {2, 1}, {2, 2}} {
		o := o
		o.Scale, o.Gateways, o.Workers = false, cfg[0], cfg[1]
		r := &runner{o: o, rep: &Report{Scenario: o.Scenario, Command: o.Command, Date: rep.Date, Machine: rep.Machine}}
		if err := sc.run(ctx, r); err != nil {
			return rep, fmt.Errorf("%d gateway(s), %d worker(s): %w", cfg[0], cfg[1], err)
		}
		tag := fmt.Sprintf("[%dg×%dw] ", cfg[0], cfg[1])
		rep.Setup = r.rep.Setup
		for _, p := range r.rep.Phases {
			p.Name = tag + p.Name
			rep.Phases = append(rep.Phases, p)
		}
		for _, row := range r.rep.Rows {
			row.Target = tag + row.Target
			rep.Rows = append(rep.Rows, row)
		}
		if len(r.rep.Rows) > 0 {
			head := r.rep.Rows[0]
			if first == 0 {
				first = head.Value
			}
			rep.row(fmt.Sprintf("scaling: %s with %d gateway(s) and %d worker(s), ratio to 1×1", head.Unit, cfg[0], cfg[1]), head.Value, head.Unit, first, head.Value/first, nil)
		}
		// At a fixed offered rate the headline is the same everywhere; what
		// a configuration changes is the cost of the scenario's last phase.
		if n := len(r.rep.Phases); n > 0 && r.rep.Phases[n-1].CPUPerOp > 0 {
			cpu := float64(r.rep.Phases[n-1].CPUPerOp) / 1e3
			if firstCPU == 0 {
				firstCPU = cpu
			}
			rep.row(fmt.Sprintf("scaling: CPU per request of %q with %d gateway(s) and %d worker(s), ratio to 1×1", r.rep.Phases[n-1].Name, cfg[0], cfg[1]), cpu, "µs", firstCPU, cpu/firstCPU, nil)
		}
		rep.Notes = append(rep.Notes, r.rep.Notes...)
	}
	rep.Setup = fmt.Sprintf("1 and 2 gateways × 1 and 2 workers, in turn; %s", rep.Setup)
	rep.Notes = append(rep.Notes, "on a machine whose cores the load generator, Redis and every wakegate process share, a second process cannot add CPU: what scaling can show here is that two gateways or two workers split the work correctly (no loss, no duplicates, no contention collapse) and what coordination costs; the throughput gain of a second process needs cores of its own")
	rep.Machine.LoadEnd = loadAvg()
	return rep, nil
}
