//go:build race

package publishers

// raceEnabled: memory assertions are skipped (t.Skip) under the race detector, whose
// shadow memory and slower goroutines distort them; CI checks them in a pass without -race.
const raceEnabled = true
