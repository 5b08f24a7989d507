//go:build race

package perf

// raceEnabled: under -race the figures mean nothing; the default runs only
// prove the measurements work, at rates the race detector can sustain.
const raceEnabled = true
