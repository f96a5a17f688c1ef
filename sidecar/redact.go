package sidecar

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
)

// redactor is a log handler that rewrites what would name a hub user in their tenant's
// log lines (their directories in paths, their name quoted in an error) into the
// placeholder the configuration uses, {username}: the tenant attribute, a pseudonym,
// tells which user, and only an operator who can map it (docs/HUB.md, "Logs") knows
// who that is.
type redactor struct {
	h slog.Handler
	r *strings.Replacer
}

// redacting wraps h so that each of pairs' old strings (old, new, old, new, …) in a
// message or an attribute's value is written as its new one, the longest first.
func redacting(h slog.Handler, pairs ...[2]string) slog.Handler {
	slices.SortFunc(pairs, func(a, b [2]string) int { return cmp.Compare(len(b[0]), len(a[0])) })
	var flat []string
	for _, p := range pairs {
		if p[0] != "" && p[0] != p[1] {
			flat = append(flat, p[0], p[1])
		}
	}
	return redactor{h: h, r: strings.NewReplacer(flat...)}
}

func (x redactor) Enabled(ctx context.Context, l slog.Level) bool { return x.h.Enabled(ctx, l) }

func (x redactor) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, x.r.Replace(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(x.attr(a))
		return true
	})
	return x.h.Handle(ctx, out)
}

func (x redactor) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = x.attr(a)
	}
	return redactor{h: x.h.WithAttrs(out), r: x.r}
}

func (x redactor) WithGroup(name string) slog.Handler {
	return redactor{h: x.h.WithGroup(name), r: x.r}
}

// attr is a with its value rewritten: strings, and errors or other values as the text
// they are logged as, when it holds an old string.
func (x redactor) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, x.r.Replace(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]any, len(g))
		for i, ga := range g {
			out[i] = x.attr(ga)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		s := fmt.Sprint(v.Any())
		if r := x.r.Replace(s); r != s {
			return slog.String(a.Key, r)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
