// Package nbtest builds .ipynb files for the tests of any package: shapes no real
// client saves, such as notebooks of tens of thousands of cells.
package nbtest

import (
	"fmt"
	"strings"
)

// OneLineCells returns an .ipynb of n one-line markdown cells, as the red team of issue
// 39 (pass 5, F2) wrote them: about 65 bytes on disk a cell, ten times that in memory.
func OneLineCells(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"metadata":{},"nbformat":4,"nbformat_minor":5,"cells":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"cell_type":"markdown","id":"c%x","metadata":{},"source":"a"}`, i)
	}
	b.WriteString("]}")
	return []byte(b.String())
}
