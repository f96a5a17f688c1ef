package lib0

import (
	"maps"
	"slices"
)

func sortedKeys(m map[string]any) []string {
	return slices.Sorted(maps.Keys(m))
}
