//go:build race

package hub

// raceEnabled: timing assertions are skipped (t.Skip) under the race detector, which
// slows the sidecar and the test several times; CI checks them in a pass without -race.
const raceEnabled = true
