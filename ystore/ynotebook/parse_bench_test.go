package ynotebook

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// benchFile is an .ipynb of n cells: code cells with a stream, a result and every tenth
// a 64 KiB PNG, markdown cells with list-form sources.
func benchFile(n int) []byte {
	png := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x89PNG", 16<<10)))
	cells := make([]any, n)
	for i := range cells {
		if i%3 == 2 {
			cells[i] = map[string]any{"id": fmt.Sprint("m", i), "cell_type": "markdown", "metadata": map[string]any{},
				"source": []any{"# Title ", fmt.Sprint(i), "\n", "some *text*, été 😀\n"}}
			continue
		}
		outs := []any{
			map[string]any{"output_type": "stream", "name": "stdout", "text": []any{"line 1\n", "line 2\n"}},
			map[string]any{"output_type": "execute_result", "execution_count": i, "metadata": map[string]any{},
				"data": map[string]any{"text/plain": []any{"42"}, "application/json": map[string]any{"n": 1.5, "i": i}}},
		}
		if i%10 == 0 {
			outs = append(outs, map[string]any{"output_type": "display_data", "metadata": map[string]any{},
				"data": map[string]any{"image/png": png, "text/plain": "<Figure>"}})
		}
		cells[i] = map[string]any{"id": fmt.Sprint("c", i), "cell_type": "code", "execution_count": i,
			"metadata": map[string]any{"tags": []any{"t"}}, "source": []any{"x = ", fmt.Sprint(i), "\n", "print(x)"}, "outputs": outs}
	}
	b, _ := json.Marshal(map[string]any{"nbformat": 4, "nbformat_minor": 5, "metadata": map[string]any{"kernelspec": map[string]any{"name": "python3", "display_name": "Python 3"}}, "cells": cells})
	return b
}

// BenchmarkParse reads a 1,000-cell file of about 9 MB (docs/BENCHMARKS.md).
func BenchmarkParse(b *testing.B) {
	data := benchFile(1000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
