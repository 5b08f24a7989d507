//go:build race

package main

// raceEnabled: the race detector slows a process's start (about a second
// for this binary), which process-level timing tests allow for.
const raceEnabled = true
