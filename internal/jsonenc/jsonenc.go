// Package jsonenc writes JSON the way encoding/json.Marshal writes it (keys sorted, <, >
// and & escaped, invalid UTF-8 replaced), byte for byte, without holding more than what it
// writes to: Marshal measures a value first and writes it into a buffer of exactly its
// size; Digest hashes it; WriteString escapes a string onto a writer. encoding/json builds
// the whole in a buffer grown by doubling and copies it out: a notebook of 57 MB took up
// to 3 times that for each read, and twice for each comparison with its file (red team of
// issue 39, pass 9).
package jsonenc

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// Writer is what the encoder writes to: a buffer, a counter, a hash, a connection.
type Writer interface {
	io.Writer
	io.StringWriter
	io.ByteWriter
}

// Marshal returns v encoded as encoding/json.Marshal encodes it, in a buffer of exactly
// its size.
func Marshal(v any) ([]byte, error) {
	n, err := Measure(v)
	if err != nil {
		return nil, err
	}
	w := &sliceWriter{b: make([]byte, 0, n.JSON)}
	if err := encodeJSON(w, v); err != nil {
		return nil, err
	}
	return w.b, nil
}

// Size is the length of a value's encoding by Marshal, and of that encoding written again
// as a JSON string (WriteString), as an MCP resource's text is.
type Size struct {
	JSON, AsString int64
}

// Measure returns the Size of v, without building its encoding.
func Measure(v any) (Size, error) {
	var c sizeCounter
	err := encodeJSON(&c, v)
	return Size{JSON: c.n, AsString: 2 + c.n + c.quoted}, err
}

// Digest returns a SHA-256 of v's encoding by Marshal, without building it.
func Digest(v any) ([sha256.Size]byte, error) {
	h := sha256.New()
	w := bufio.NewWriterSize(h, 64<<10)
	if err := encodeJSON(w, v); err != nil {
		return [sha256.Size]byte{}, err
	}
	if err := w.Flush(); err != nil {
		return [sha256.Size]byte{}, err
	}
	return [sha256.Size]byte(h.Sum(nil)), nil
}

// encodeJSON writes v to w. The containers a notebook's values are made of are walked
// here; any other value (a number, a boolean, null, a type of a test's) is small and is
// encoded by encoding/json.
func encodeJSON(w Writer, v any) error {
	switch x := v.(type) {
	case string:
		WriteString(w, x)
	case map[string]any:
		if x == nil {
			_, _ = w.WriteString("null")
			return nil
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, strings.Compare)
		_ = w.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				_ = w.WriteByte(',')
			}
			WriteString(w, k)
			_ = w.WriteByte(':')
			if err := encodeJSON(w, x[k]); err != nil {
				return err
			}
		}
		_ = w.WriteByte('}')
	case []any:
		return encodeList(w, x)
	case []map[string]any:
		return encodeList(w, x)
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Errorf("encode %T: %w", x, err)
		}
		_, _ = w.Write(b)
	}
	return nil
}

// encodeList writes a list; nil is null, as encoding/json writes a nil slice.
func encodeList[E any](w Writer, list []E) error {
	if list == nil {
		_, _ = w.WriteString("null")
		return nil
	}
	_ = w.WriteByte('[')
	for i, e := range list {
		if i > 0 {
			_ = w.WriteByte(',')
		}
		if err := encodeJSON(w, e); err != nil {
			return err
		}
	}
	_ = w.WriteByte(']')
	return nil
}

// asciiEscapes is what encoding/json writes for an ASCII byte it escapes; "" for one it
// writes as it is.
var asciiEscapes = func() (t [utf8.RuneSelf]string) {
	const hex = "0123456789abcdef"
	for b := range utf8.RuneSelf {
		switch {
		case b == '\\' || b == '"':
			t[b] = `\` + string(rune(b))
		case b == '\b':
			t[b] = `\b`
		case b == '\f':
			t[b] = `\f`
		case b == '\n':
			t[b] = `\n`
		case b == '\r':
			t[b] = `\r`
		case b == '\t':
			t[b] = `\t`
		case b < 0x20 || b == '<' || b == '>' || b == '&':
			t[b] = `\u00` + string(hex[b>>4]) + string(hex[b&0xF])
		}
	}
	return t
}()

// WriteString writes s quoted with encoding/json's escapes (HTML escaping on): runs of
// bytes that need none are written as they are.
func WriteString(w Writer, s string) {
	_ = w.WriteByte('"')
	start := 0
	escape := func(i, size int, esc string) {
		if start < i {
			_, _ = w.WriteString(s[start:i])
		}
		_, _ = w.WriteString(esc)
		start = i + size
	}
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if esc := asciiEscapes[b]; esc != "" {
				escape(i, 1, esc)
			}
			i++
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			escape(i, size, `\ufffd`)
		case c == '\u2028':
			escape(i, size, `\u2028`)
		case c == '\u2029':
			escape(i, size, `\u2029`)
		}
		i += size
	}
	if start < len(s) {
		_, _ = w.WriteString(s[start:])
	}
	_ = w.WriteByte('"')
}

// sliceWriter appends to a slice made large enough beforehand.
type sliceWriter struct{ b []byte }

func (s *sliceWriter) Write(p []byte) (int, error)       { s.b = append(s.b, p...); return len(p), nil }
func (s *sliceWriter) WriteString(p string) (int, error) { s.b = append(s.b, p...); return len(p), nil }
func (s *sliceWriter) WriteByte(c byte) error            { s.b = append(s.b, c); return nil }

// sizeCounter counts what is written to it, and the quotes and backslashes among it: an
// encoding holds no other byte that a JSON string escapes.
type sizeCounter struct{ n, quoted int64 }

func (c *sizeCounter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	c.quoted += int64(bytes.Count(p, []byte{'"'}) + bytes.Count(p, []byte{'\\'}))
	return len(p), nil
}

func (c *sizeCounter) WriteString(p string) (int, error) {
	c.n += int64(len(p))
	c.quoted += int64(strings.Count(p, `"`) + strings.Count(p, `\`))
	return len(p), nil
}

func (c *sizeCounter) WriteByte(b byte) error {
	c.n++
	if b == '"' || b == '\\' {
		c.quoted++
	}
	return nil
}
