//go:build !race

package publishers

const raceEnabled = false
