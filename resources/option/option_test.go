package option

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

type sample struct {
	URL     string            `option:"url"`
	Retries int               `option:"max_retries"`
	Backoff time.Duration     `option:"backoff"`
	Headers map[string]string `option:"headers"`
	List    []string          `option:"templates"`
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		raw     map[string]any
		want    sample
		wantErr error
		msg     []string // substrings of the error
	}{
		{name: "nothing keeps the defaults", want: sample{Retries: 5, Backoff: time.Second}},
		{name: "every type", raw: map[string]any{"url": "http://x", "max_retries": 2, "backoff": "250ms",
			"headers": map[string]any{"A": "b"}, "templates": []any{"t"}},
			want: sample{URL: "http://x", Retries: 2, Backoff: 250 * time.Millisecond, Headers: map[string]string{"A": "b"}, List: []string{"t"}}},
		{name: "a duration value", raw: map[string]any{"backoff": 3 * time.Second}, want: sample{Retries: 5, Backoff: 3 * time.Second}},
		{name: "a whole float", raw: map[string]any{"max_retries": 3.0}, want: sample{Retries: 3, Backoff: time.Second}},
		{name: "unknown key", raw: map[string]any{"max_retry": 3}, wantErr: ErrUnknown,
			msg: []string{`max_retry: unknown key (known: backoff, headers, max_retries, templates, url)`}},
		{name: "two unknown keys", raw: map[string]any{"b": 1, "a": 2}, wantErr: ErrUnknown, msg: []string{"a: unknown key", "b: unknown key"}},
		{name: "bare number duration", raw: map[string]any{"backoff": 5}, wantErr: ErrInvalid,
			msg: []string{`backoff: invalid duration 5: use a number with a unit`}},
		{name: "bad duration", raw: map[string]any{"backoff": "soon"}, wantErr: ErrInvalid, msg: []string{`invalid duration "soon"`}},
		{name: "fractional integer", raw: map[string]any{"max_retries": 1.5}, wantErr: ErrInvalid, msg: []string{"max_retries: want a whole number"}},
		{name: "integer past int64", raw: map[string]any{"max_retries": uint64(1) << 63}, wantErr: ErrInvalid,
			msg: []string{"max_retries: 9223372036854775808 is out of range"}},
		{name: "float past int64", raw: map[string]any{"max_retries": 1e19}, wantErr: ErrInvalid, msg: []string{"max_retries: 1e+19 is out of range"}},
		{name: "infinity for integer", raw: map[string]any{"max_retries": math.Inf(1)}, wantErr: ErrInvalid, msg: []string{"max_retries: want a whole number, got +Inf"}},
		{name: "NaN for integer", raw: map[string]any{"max_retries": math.NaN()}, wantErr: ErrInvalid, msg: []string{"max_retries: want a whole number, got NaN"}},
		{name: "largest int64", raw: map[string]any{"max_retries": uint64(1)<<63 - 1}, want: sample{Retries: 1<<63 - 1, Backoff: time.Second}},
		{name: "string for integer", raw: map[string]any{"max_retries": "5"}, wantErr: ErrInvalid, msg: []string{"max_retries: "}},
		{name: "number for string", raw: map[string]any{"url": 4}, wantErr: ErrInvalid, msg: []string{"url: "}},
		{name: "wrong header", raw: map[string]any{"headers": map[string]any{"A": 1}}, wantErr: ErrInvalid, msg: []string{"headers[A]: "}},
		{name: "unknown and invalid", raw: map[string]any{"url": 4, "x": 1}, wantErr: ErrUnknown, msg: []string{"url: ", "x: unknown key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sample{Retries: 5, Backoff: time.Second}
			err := Decode(tt.raw, &got)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Decode = %v, want %v", err, tt.wantErr)
			}
			for _, m := range tt.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not contain %q", err, m)
				}
			}
			if tt.wantErr == nil && !equal(got, tt.want) {
				t.Errorf("decoded %+v, want %+v", got, tt.want)
			}
		})
	}
}

func equal(a, b sample) bool {
	return a.URL == b.URL && a.Retries == b.Retries && a.Backoff == b.Backoff &&
		len(a.Headers) == len(b.Headers) && a.Headers["A"] == b.Headers["A"] && strings.Join(a.List, ",") == strings.Join(b.List, ",")
}

// TestDecodeSquash checks that a squashed struct's keys are known.
func TestDecodeSquash(t *testing.T) {
	type common struct {
		Size int `option:"queue_size"`
	}
	var o struct {
		URL    string `option:"url"`
		Common common `option:",squash"`
	}
	if err := Decode(map[string]any{"url": "u", "queue_size": 3}, &o); err != nil || o.Common.Size != 3 || o.URL != "u" {
		t.Fatalf("decoded %+v, %v", o, err)
	}
	if err := Decode(map[string]any{"size": 3}, &o); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "(known: queue_size, url)") {
		t.Fatalf("unknown key: %v", err)
	}
}

// TestDecodeRemain checks that a remain field takes the keys no other field does.
func TestDecodeRemain(t *testing.T) {
	var o struct {
		Enabled *bool          `option:"enabled"`
		Rest    map[string]any `option:",remain"`
	}
	if err := Decode(map[string]any{"enabled": false, "timeout": "1s"}, &o); err != nil {
		t.Fatal(err)
	}
	if o.Enabled == nil || *o.Enabled || o.Rest["timeout"] != "1s" || len(o.Rest) != 1 {
		t.Fatalf("decoded %+v", o)
	}
	if err := Decode(map[string]any{"x": 1}, &struct{}{}); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "known: none") {
		t.Fatalf("no options: %v", err)
	}
}

// TestDecodeNested checks that keys are checked at every depth, each error naming its
// dotted key and the keys known there, beside the values of the wrong type.
func TestDecodeNested(t *testing.T) {
	type inner struct {
		Path string        `option:"path"`
		Poll time.Duration `option:"poll_interval"`
	}
	type outer struct {
		Store inner             `option:"store"`
		Free  map[string]inner  `option:"named"`
		Any   map[string]any    `option:"options"`
		Ptr   *inner            `option:"ptr"`
		Text  map[string]string `option:"text"`
		List  []inner           `option:"list"`
	}
	tests := []struct {
		name    string
		raw     map[string]any
		wantErr error
		msg     []string
	}{
		{name: "deep unknown", raw: map[string]any{"store": map[string]any{"pth": "x"}}, wantErr: ErrUnknown,
			msg: []string{"store.pth: unknown key (known: path, poll_interval)"}},
		{name: "unknown in a map's entry", raw: map[string]any{"named": map[string]any{"A": map[string]any{"pathh": "x"}}}, wantErr: ErrUnknown,
			msg: []string{"named.A.pathh: unknown key (known: path, poll_interval)"}},
		{name: "unknown in a list's item", raw: map[string]any{"list": []any{map[string]any{"path": "x"}, map[string]any{"pth": "x"}}}, wantErr: ErrUnknown,
			msg: []string{"list[1].pth: unknown key (known: path, poll_interval)"}},
		{name: "behind a pointer", raw: map[string]any{"ptr": map[string]any{"x": 1}}, wantErr: ErrUnknown, msg: []string{"ptr.x: unknown key"}},
		{name: "free-form options take any key", raw: map[string]any{"options": map[string]any{"Anything": map[string]any{"x": 1}}}},
		{name: "keys match exactly", raw: map[string]any{"Store": map[string]any{}}, wantErr: ErrUnknown, msg: []string{"Store: unknown key"}},
		{name: "unknown beside invalid", raw: map[string]any{"store": map[string]any{"poll_interval": 5, "x": 1}}, wantErr: ErrInvalid,
			msg: []string{"store.poll_interval: invalid duration 5", "store.x: unknown key"}},
		{name: "a section of the wrong type", raw: map[string]any{"store": 3}, wantErr: ErrInvalid, msg: []string{"store: "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o outer
			err := Decode(tt.raw, &o)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Decode = %v, want %v", err, tt.wantErr)
			}
			var ke *KeyError
			if err != nil && !errors.As(err, &ke) {
				t.Errorf("error %v is no *KeyError", err)
			}
			for _, m := range tt.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not contain %q", err, m)
				}
			}
		})
	}
}

// TestDecodeText checks that a Text (an environment variable, a flag) is parsed as its
// field takes it, and refused by name when it does not parse.
func TestDecodeText(t *testing.T) {
	type target struct {
		N    int           `option:"n"`
		U    uint8         `option:"u"`
		B    bool          `option:"b"`
		F    float64       `option:"f"`
		D    time.Duration `option:"d"`
		S    string        `option:"s"`
		List []string      `option:"list"`
	}
	var got target
	raw := map[string]any{"n": Text("12"), "u": Text("7"), "b": Text("true"), "f": Text("0.5"), "d": Text("250ms"),
		"s": Text("12345"), "list": Text("http://a,http://b")}
	if err := Decode(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := target{N: 12, U: 7, B: true, F: 0.5, D: 250 * time.Millisecond, S: "12345", List: []string{"http://a", "http://b"}}
	if got.N != want.N || got.U != want.U || got.B != want.B || got.F != want.F || got.D != want.D || got.S != want.S ||
		strings.Join(got.List, " ") != strings.Join(want.List, " ") {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
	for key, val := range map[string]Text{"n": "lots", "u": "300", "b": "perhaps", "f": "half", "d": "5"} {
		err := Decode(map[string]any{key: val}, &target{})
		if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), key+": ") {
			t.Errorf("%s = %q: %v, want ErrInvalid naming %s", key, val, err, key)
		}
	}
	if err := Decode(map[string]any{"d": Text("5")}, &target{}); err == nil || !strings.Contains(err.Error(), `invalid duration "5"`) {
		t.Errorf("a bare number as text: %v", err)
	}
	for key, val := range map[string]Text{"n": "9223372036854775808", "u": "300"} {
		if err := Decode(map[string]any{key: val}, &target{}); err == nil || !strings.Contains(err.Error(), "is out of range") {
			t.Errorf("%s = %q: %v, want it out of range", key, val, err)
		}
	}
}

// Rekey renames the keys of a library's refusals, joined or wrapped, to the daemon's,
// drops those it maps to "", and keeps other errors as they are.
func TestRekey(t *testing.T) {
	other := errors.New("not a key")
	err := errors.Join(Invalid("max_bytes", "must be at least %d, got %d", 2, 1), fmt.Errorf("wrapped: %w", Invalid("gone", "x")), other)
	rename := map[string]string{"max_bytes": "server.max_bytes"}
	got := Rekey(err, func(k string) string { return rename[k] })
	if len(got) != 2 || got[0].Error() != "server.max_bytes: must be at least 2, got 1" || !errors.Is(got[0], ErrInvalid) || got[1] != other {
		t.Fatalf("Rekey = %v", got)
	}
	if Rekey(nil, func(string) string { return "x" }) != nil {
		t.Fatal("Rekey(nil) is not nil")
	}
}
