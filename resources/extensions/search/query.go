package search

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode"
)

// ErrBadQuery is wrapped by Compile for an empty query or a regular
// expression that does not parse.
var ErrBadQuery = errors.New("bad query")

// Query is a compiled search: a case-insensitive substring, or an RE2
// regular expression matched line by line.
type Query struct {
	text  string         // the plain query, lowercased ("" for a regexp)
	re    *regexp.Regexp // nil for a plain query
	grams []uint32       // trigrams every matching field holds (lowercased)
}

// Compile compiles q: a plain substring matched case-insensitively, or, with
// regex, an RE2 expression ((?i) for case-insensitive) matched per line.
func Compile(q string, regex bool) (*Query, error) {
	if strings.TrimSpace(q) == "" {
		return nil, fmt.Errorf("%w: empty query", ErrBadQuery)
	}
	if !regex {
		lower := strings.ToLower(q)
		return &Query{text: lower, grams: trigrams(lower)}, nil
	}
	re, err := regexp.Compile(q)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadQuery, err)
	}
	parsed, err := syntax.Parse(q, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadQuery, err)
	}
	var grams []uint32
	for _, lit := range requiredLiterals(parsed.Simplify()) {
		grams = append(grams, trigrams(strings.ToLower(lit))...)
	}
	return &Query{re: re, grams: grams}, nil
}

// matchLine reports whether one line matches.
func (q *Query) matchLine(line string) bool {
	if q.re != nil {
		return q.re.MatchString(line)
	}
	return strings.Contains(strings.ToLower(line), q.text)
}

// mayMatch is the cheap whole-field check before lines are looked at.
func (q *Query) mayMatch(f *field) bool {
	for _, g := range q.grams {
		if !f.has(g) {
			return false
		}
	}
	return true
}

// requiredLiterals returns literal strings every match of re contains: the
// runs of literals of a top-level concatenation. Case-folded literals count
// only where folding stays within ASCII, so that lowercasing the text keeps
// every match's trigrams (the filter never drops a match).
func requiredLiterals(re *syntax.Regexp) []string {
	var out []string
	var run strings.Builder
	flush := func() {
		if run.Len() >= 3 {
			out = append(out, run.String())
		}
		run.Reset()
	}
	var walk func(re *syntax.Regexp)
	walk = func(re *syntax.Regexp) {
		switch re.Op {
		case syntax.OpLiteral:
			for _, r := range re.Rune {
				if re.Flags&syntax.FoldCase != 0 && !asciiFold(r) {
					flush()
					continue
				}
				run.WriteRune(r)
			}
		case syntax.OpCapture:
			walk(re.Sub[0])
		case syntax.OpConcat:
			for _, sub := range re.Sub {
				walk(sub)
			}
		case syntax.OpPlus:
			walk(re.Sub[0]) // at least once; what follows is not adjacent
			flush()
		default:
			flush()
		}
	}
	walk(re)
	flush()
	return out
}

// asciiFold reports whether every case variant of r is ASCII.
func asciiFold(r rune) bool {
	for f := r; ; {
		if f > unicode.MaxASCII {
			return false
		}
		if f = unicode.SimpleFold(f); f == r {
			return true
		}
	}
}

// trigrams returns the byte trigrams of s, deduplicated in order.
func trigrams(s string) []uint32 {
	var out []uint32
	seen := map[uint32]bool{}
	for i := 0; i+3 <= len(s); i++ {
		g := gram(s, i)
		if !seen[g] {
			seen[g] = true
			out = append(out, g)
		}
	}
	return out
}

func gram(s string, i int) uint32 { return uint32(s[i])<<16 | uint32(s[i+1])<<8 | uint32(s[i+2]) }
