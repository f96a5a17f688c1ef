package yjs

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite the decoded golden files in testdata/golden")

// goldenCase is one case written by testdata/yjs-golden/golden.mjs.
type goldenCase struct {
	Name        string            `json:"name"`
	Update      string            `json:"update"`
	Roots       map[string]string `json:"roots"`
	JSON        map[string]any    `json:"json"`
	State       string            `json:"state"`
	StateVector string            `json:"stateVector"`
}

func loadGolden(t testing.TB) []goldenCase {
	t.Helper()
	b, err := os.ReadFile("testdata/golden/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []goldenCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rootJSON reads the roots the way the Node script did and renders them like
// JSON.stringify, so they compare with what Yjs produced.
func rootJSON(d *Doc, roots map[string]string) any {
	out := map[string]any{}
	for name, kind := range roots {
		var v any
		switch kind {
		case "map":
			v = d.Map(name)
		case "array":
			v = d.Array(name)
		case "text":
			v = d.Text(name)
		default:
			v = d.XmlFragment(name)
		}
		out[name] = ToJSON(v)
	}
	return stringifyLike(out)
}

// stringifyLike mirrors JSON.stringify with the golden script's replacer: undefined
// object members vanish, undefined array elements become null, bigints and byte arrays
// become tagged objects; numbers end up as float64.
func stringifyLike(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if e == any(Undefined) {
				continue
			}
			out[k] = stringifyLike(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			if e != any(Undefined) {
				out[i] = stringifyLike(e)
			}
		}
		return out
	case int64:
		return map[string]any{"bigint": strconv.FormatInt(x, 10)}
	case []byte:
		bs := make([]any, len(x))
		for i, c := range x {
			bs[i] = float64(c)
		}
		return map[string]any{"bytes": bs}
	case *Doc:
		return map[string]any{}
	}
	return v
}

func TestGolden(t *testing.T) {
	for _, c := range loadGolden(t) {
		t.Run(c.Name, func(t *testing.T) {
			u := mustHex(t, c.Update)
			d := NewDoc()
			if _, err := d.ApplyUpdate(u); err != nil {
				t.Fatal(err)
			}
			if got := rootJSON(d, c.Roots); !reflect.DeepEqual(got, any(c.JSON)) {
				t.Errorf("json:\n got %#v\nwant %#v", got, c.JSON)
			}
			state, err := d.EncodeStateAsUpdate(nil)
			if err != nil {
				t.Fatal(err)
			}
			if want := mustHex(t, c.State); !bytes.Equal(state, want) {
				t.Errorf("state:\n got %x\nwant %x", state, want)
			}
			if sv, want := d.EncodeStateVector(), mustHex(t, c.StateVector); !bytes.Equal(sv, want) {
				t.Errorf("state vector: got %x want %x", sv, want)
			}
			dec, err := DecodeUpdate(u)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(dec, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "golden", c.Name+".decoded.json")
			if *updateGolden {
				if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(append(got, '\n'), want) {
				t.Errorf("decoded %s differs from golden:\n%s", c.Name, got)
			}
		})
	}
}
