//go:build race

package sqlite

// raceEnabled: timing assertions are skipped under the race detector, which slows the
// pure-Go SQLite several times.
const raceEnabled = true
