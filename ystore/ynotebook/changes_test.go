package ynotebook

import (
	"encoding/json"
	"strconv"
	"testing"
)

// jsonSum is equal for equal values, an object's members set in any order, and differs
// between the different values here (Changes.addCell compares outputs by their sums).
func TestJSONSum(t *testing.T) {
	vals := []any{nil, true, false, "", "a", "1", json.Number("1"), json.Number("1.5"),
		[]any{}, map[string]any{}, []any{"a", "b"}, []any{"b", "a"}, []any{"ab"}, []any{[]any{"a"}, "b"},
		map[string]any{"a": "b"}, map[string]any{"b": "a"}, map[string]any{"a": "b", "c": "d"}, map[string]any{"a": "d", "c": "b"},
		map[string]any{"data": map[string]any{"text/plain": "1"}, "output_type": "display_data"},
		map[string]any{"data": map[string]any{"text/plain": "2"}, "output_type": "display_data"}}
	for i, x := range vals {
		for j, y := range vals {
			if same := jsonSum(x) == jsonSum(y); same != (i == j) {
				t.Errorf("jsonSum(%v) == jsonSum(%v): %v", x, y, same)
			}
		}
	}
	a, b := map[string]any{}, map[string]any{}
	for i := range 100 {
		a[strconv.Itoa(i)] = []any{json.Number(strconv.Itoa(i)), nil}
		b[strconv.Itoa(99-i)] = []any{json.Number(strconv.Itoa(99 - i)), nil}
	}
	if !equalJSON(a, b) || jsonSum(a) != jsonSum(b) || !jsonSum(a).ok {
		t.Error("an object set in another order: another sum")
	}
	// a type the sum does not know: equal sums do not decide
	x, y := map[string]any{"k": float64(1)}, map[string]any{"k": float64(2)}
	if sx, sy := jsonSum(x), jsonSum(y); sx.ok || sx != sy || sx.decides(sy) {
		t.Errorf("unknown types: sums %v and %v decide", sx, sy)
	}
}
