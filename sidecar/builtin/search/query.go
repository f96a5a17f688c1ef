package search

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode"
	"unicode/utf8"
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
	lits  []string       // lowercased ASCII strings every matching field holds, case aside
}

// Compile compiles q: a plain substring matched case-insensitively, or, with
// regex, an RE2 expression ((?i) for case-insensitive) matched per line.
func Compile(q string, regex bool) (*Query, error) {
	if strings.TrimSpace(q) == "" {
		return nil, fmt.Errorf("%w: empty query", ErrBadQuery)
	}
	if !regex {
		lower := strings.ToLower(q)
		// No literals: strings.ToLower folds the Kelvin sign to k and İ to i, which
		// comparing ASCII bytes would not; the trigrams are of lowered text.
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
	out := &Query{re: re}
	for _, lit := range requiredLiterals(parsed.Simplify()) {
		lower := strings.ToLower(lit)
		out.grams = append(out.grams, trigrams(lower)...)
		out.lits = append(out.lits, asciiOnly(lower)...)
	}
	return out, nil
}

// matchLine reports whether one line matches.
func (q *Query) matchLine(line string) bool {
	if q.re != nil {
		return q.re.MatchString(line)
	}
	return strings.Contains(strings.ToLower(line), q.text)
}

// mayMatch is the cheap whole-field check before lines are looked at: the
// Bloom filter, then the literals in the text.
func (q *Query) mayMatch(f *field) bool {
	for _, g := range q.grams {
		if !f.has(g) {
			return false
		}
	}
	for _, lit := range q.lits {
		if !containsFoldASCII(f.text, lit) {
			return false
		}
	}
	return true
}

// asciiOnly returns s alone when it is ASCII: only then does comparing bytes
// with ASCII case folding keep every match.
func asciiOnly(s string) []string {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return nil
		}
	}
	return []string{s}
}

// containsFoldASCII reports whether s contains lit (lowercase ASCII) with the
// ASCII letters of s folded to lowercase.
func containsFoldASCII(s, lit string) bool {
	if lit == "" {
		return true
	}
	first, upper := lit[0], lit[0]
	if 'a' <= first && first <= 'z' {
		upper -= 'a' - 'A'
	}
	for i := 0; i+len(lit) <= len(s); i++ {
		if c := s[i]; c != first && c != upper {
			continue
		}
		j := 1
		for ; j < len(lit); j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != lit[j] {
				break
			}
		}
		if j == len(lit) {
			return true
		}
	}
	return false
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
