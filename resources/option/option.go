// Package option is the one strict decoder of configuration: the daemon's configuration
// (file, environment and flags, merged by the command) and every plugin's options
// (publishers, resource gates, token verifiers, extensions, hooks). A misspelt key or a
// value of the wrong type is refused by name, as a *KeyError, the same way wherever the
// key was meant to go.
package option

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/keyerr"
)

// ErrUnknown is wrapped by Decode's *KeyError for a key that no field takes.
var ErrUnknown = errors.New("unknown key")

// ErrInvalid is wrapped by Decode's *KeyError for a value of the wrong type or that does
// not parse, and by a library's validation of its configuration (Invalid): the one
// sentinel of a configuration value refused, keyerr's (config.ErrInvalid is the same).
var ErrInvalid = keyerr.ErrInvalid

// Tag is the struct tag that names a field's key: `option:"max_retries"`.
const Tag = "option"

// KeyError is a problem with one key (keyerr's): "key: message".
type KeyError = keyerr.KeyError

// Invalid and Rekey are keyerr's, for the plugins that validate their options.
var (
	Invalid = keyerr.Invalid
	Rekey   = keyerr.Rekey
)

// Text is a value given as text (an environment variable, a command-line flag, a string
// of the daemon's file): it is parsed as the field it goes into takes it (a number, a
// boolean, a comma-separated list, a duration), where a string in a plugin's options is
// no number.
type Text string

// Decode sets the fields of the struct into points to from raw by their `option` tags,
// at every depth, keeping the fields raw does not name (defaults). Every unknown key
// (ErrUnknown, with the keys known there) and every value of the wrong type (ErrInvalid)
// is a *KeyError naming its dotted key, all of them joined, sorted by key. Keys match
// exactly; durations are strings with a unit, integers whole numbers. A field tagged
// `option:",squash"` adds the keys of its struct; one tagged `option:",remain"` takes the
// keys no other field does.
func Decode(raw map[string]any, into any) error {
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result:     into,
		TagName:    Tag,
		MatchName:  func(key, field string) bool { return key == field },
		DecodeHook: mapstructure.ComposeDecodeHookFunc(textHook, DurationHook, wholeNumberHook),
	})
	if err != nil {
		return fmt.Errorf("options decoder: %w", err)
	}
	errs := unknown(raw, reflect.TypeOf(into), "")
	if err := dec.Decode(raw); err != nil {
		errs = append(errs, invalid(err)...)
	}
	slices.SortStableFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// unknown lists the keys of raw, at every depth, that type t does not take.
func unknown(raw any, t reflect.Type, prefix string) []error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if items, ok := raw.([]any); ok && t.Kind() == reflect.Slice { // a list's items: list[0].key
		var errs []error
		for i, item := range items {
			errs = append(errs, unknown(item, t.Elem(), fmt.Sprintf("%s[%d]", prefix, i))...)
		}
		return errs
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil // not a section: the decoder says what is wrong with it
	}
	var errs []error
	switch t.Kind() {
	case reflect.Map:
		for _, k := range slices.Sorted(maps.Keys(m)) {
			errs = append(errs, unknown(m[k], t.Elem(), join(prefix, k))...)
		}
	case reflect.Struct:
		fs, remain := fields(t)
		keys := slices.Sorted(maps.Keys(fs))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if f, ok := fs[k]; ok {
				errs = append(errs, unknown(m[k], f, join(prefix, k))...)
			} else if !remain {
				errs = append(errs, &KeyError{Key: join(prefix, k), Msg: fmt.Sprintf("%v (known: %s)", ErrUnknown, list(keys)), Err: ErrUnknown})
			}
		}
	}
	return errs
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

func list(keys []string) string {
	if len(keys) == 0 {
		return "none"
	}
	return strings.Join(keys, ", ")
}

// fields maps the keys of struct type t, those of its squashed fields among them, to
// their types; remain reports a field that takes the others.
func fields(t reflect.Type) (keys map[string]reflect.Type, remain bool) {
	keys = map[string]reflect.Type{}
	for f := range t.Fields() {
		name, flags, _ := strings.Cut(f.Tag.Get(Tag), ",")
		switch {
		case strings.Contains(flags, "remain"):
			remain = true
		case strings.Contains(flags, "squash"):
			sub, r := fields(f.Type)
			maps.Copy(keys, sub)
			remain = remain || r
		case name != "" && name != "-":
			keys[name] = f.Type
		}
	}
	return keys, remain
}

// invalid turns mapstructure's errors into one ErrInvalid per key.
func invalid(err error) []error {
	var de *mapstructure.DecodeError
	switch x := err.(type) {
	case interface{ Unwrap() []error }:
		var out []error
		for _, sub := range x.Unwrap() {
			out = append(out, invalid(sub)...)
		}
		return out
	default:
		if errors.As(err, &de) {
			return []error{&KeyError{Key: de.Name(), Msg: de.Unwrap().Error(), Err: ErrInvalid}}
		}
		return []error{fmt.Errorf("%w: %v", ErrInvalid, err)}
	}
}

var durationType = reflect.TypeFor[time.Duration]()

// DurationHook is the mapstructure hook that parses durations from strings with a unit
// ("250ms", "5s") and refuses bare numbers, which would silently mean nanoseconds.
func DurationHook(_ reflect.Type, to reflect.Type, data any) (any, error) {
	if to != durationType {
		return data, nil
	}
	switch d := data.(type) {
	case time.Duration:
		return d, nil
	case string:
		if parsed, err := time.ParseDuration(d); err == nil {
			return parsed, nil
		}
		data = fmt.Sprintf("%q", d)
	}
	return nil, fmt.Errorf("invalid duration %v: use a number with a unit, such as 250ms, 5s or 1m", data)
}

// wholeNumberHook refuses, for an integer, a fractional number, which mapstructure
// truncates, and one out of the integer's range, which it wraps (2^63 read as -2^63).
func wholeNumberHook(_ reflect.Type, to reflect.Type, data any) (any, error) {
	var lo, hi *big.Int
	switch to.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		hi = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(to.Bits()-1)), big.NewInt(1))
		lo = new(big.Int).Sub(new(big.Int).Neg(hi), big.NewInt(1))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		hi = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(to.Bits())), big.NewInt(1))
		lo = new(big.Int)
	default:
		return data, nil
	}
	var n *big.Int
	switch v := reflect.ValueOf(data); v.Kind() {
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if math.IsInf(f, 0) || f != math.Trunc(f) { // a fraction, NaN or an infinity
			return nil, fmt.Errorf("want a whole number, got %v", f)
		}
		n, _ = big.NewFloat(f).Int(nil)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n = big.NewInt(v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n = new(big.Int).SetUint64(v.Uint())
	default:
		return data, nil
	}
	if n.Cmp(lo) < 0 || n.Cmp(hi) > 0 {
		return nil, fmt.Errorf("%v is out of range: want %v to %v", data, lo, hi)
	}
	return data, nil
}

// textHook parses a Text as the field it goes into takes it: a number, a boolean, a
// comma-separated list; a duration and a string stay strings (DurationHook parses the
// one).
func textHook(_ reflect.Type, to reflect.Type, data any) (any, error) {
	s, ok := data.(Text)
	if !ok {
		return data, nil
	}
	var v any
	var err error
	switch to.Kind() {
	case reflect.Bool:
		v, err = strconv.ParseBool(string(s))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if to == durationType {
			return string(s), nil
		}
		v, err = strconv.ParseInt(string(s), 10, to.Bits())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v, err = strconv.ParseUint(string(s), 10, to.Bits())
	case reflect.Float32, reflect.Float64:
		v, err = strconv.ParseFloat(string(s), to.Bits())
	case reflect.Slice:
		var items []any
		if s != "" {
			for item := range strings.SplitSeq(string(s), ",") {
				items = append(items, Text(item))
			}
		}
		return items, nil
	default:
		return string(s), nil
	}
	if errors.Is(err, strconv.ErrRange) {
		return nil, fmt.Errorf("%q is out of range for a %s", string(s), to.Kind())
	}
	if err != nil {
		return nil, fmt.Errorf("%q is not a %s", string(s), to.Kind())
	}
	return v, nil
}
