package option

import (
	"errors"
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
			msg: []string{`unknown option "max_retry" (known: backoff, headers, max_retries, templates, url)`}},
		{name: "two unknown keys", raw: map[string]any{"b": 1, "a": 2}, wantErr: ErrUnknown, msg: []string{`"a"`, `"b"`}},
		{name: "bare number duration", raw: map[string]any{"backoff": 5}, wantErr: ErrInvalid,
			msg: []string{`invalid option "backoff": invalid duration 5: use a number with a unit`}},
		{name: "bad duration", raw: map[string]any{"backoff": "soon"}, wantErr: ErrInvalid, msg: []string{`invalid duration "soon"`}},
		{name: "fractional integer", raw: map[string]any{"max_retries": 1.5}, wantErr: ErrInvalid, msg: []string{`"max_retries"`, "whole number"}},
		{name: "string for integer", raw: map[string]any{"max_retries": "5"}, wantErr: ErrInvalid, msg: []string{`"max_retries"`}},
		{name: "number for string", raw: map[string]any{"url": 4}, wantErr: ErrInvalid, msg: []string{`"url"`}},
		{name: "wrong header", raw: map[string]any{"headers": map[string]any{"A": 1}}, wantErr: ErrInvalid, msg: []string{`"headers[A]"`}},
		{name: "unknown and invalid", raw: map[string]any{"url": 4, "x": 1}, wantErr: ErrUnknown, msg: []string{`"url"`, `"x"`}},
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
