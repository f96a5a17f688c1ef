//go:build race

package sqlite

// raceEnabled: timing assertions are skipped (t.Skip) under the race detector, which
// slows the pure-Go SQLite several times; CI checks them in a pass without -race.
const raceEnabled = true
