//go:build !race

package publish

const raceEnabled = false
