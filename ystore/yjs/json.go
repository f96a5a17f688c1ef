package yjs

import "encoding/json"

// jsonString renders a decoded JSON value back to JSON text like JSON.stringify.
func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "null"
	}
	return string(b)
}
