// Package option is the one decoder of plugin options (publishers, resource gates,
// token verifiers, extensions, hooks): strict, so that a misspelt key or a value of the
// wrong type is refused, by name, the same way whichever plugin it was meant for.
package option

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
)

// ErrUnknown is wrapped by Decode for a key that no field of the options takes.
var ErrUnknown = errors.New("unknown option")

// ErrInvalid is wrapped by Decode for a value of the wrong type or that does not parse.
var ErrInvalid = errors.New("invalid option")

// Tag is the struct tag that names a field's key: `option:"max_retries"`.
const Tag = "option"

// Decode sets the fields of the struct into points to from raw by their `option` tags,
// keeping the fields raw does not name (defaults). An unknown key or a value of the wrong
// type is an error naming the key (ErrUnknown, ErrInvalid); durations are strings with a
// unit, integers whole numbers. A field tagged `option:",squash"` adds the keys of its
// struct; one tagged `option:",remain"` takes the keys no other field does.
func Decode(raw map[string]any, into any) error {
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result:     into,
		TagName:    Tag,
		DecodeHook: mapstructure.ComposeDecodeHookFunc(DurationHook, wholeNumberHook),
	})
	if err != nil {
		return fmt.Errorf("options decoder: %w", err)
	}
	var errs []error
	if keys, remain := known(into); !remain {
		for _, k := range slices.Sorted(maps.Keys(raw)) {
			if !slices.Contains(keys, k) {
				errs = append(errs, fmt.Errorf("%w %q (known: %s)", ErrUnknown, k, list(keys)))
			}
		}
	}
	if err := dec.Decode(raw); err != nil {
		errs = append(errs, invalid(err)...)
	}
	return errors.Join(errs...)
}

func list(keys []string) string {
	if len(keys) == 0 {
		return "none"
	}
	return strings.Join(keys, ", ")
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
			return []error{fmt.Errorf("%w %q: %v", ErrInvalid, de.Name(), de.Unwrap())}
		}
		return []error{fmt.Errorf("%w: %v", ErrInvalid, err)}
	}
}

// known lists the keys of the struct into points to, sorted; remain reports a field
// that takes the others.
func known(into any) (keys []string, remain bool) {
	t := reflect.TypeOf(into)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, true // a map takes any key
	}
	keys, remain = fields(t)
	slices.Sort(keys)
	return keys, remain
}

// fields lists the keys of struct type t, those of its squashed fields among them.
func fields(t reflect.Type) (keys []string, remain bool) {
	for f := range t.Fields() {
		name, flags, _ := strings.Cut(f.Tag.Get(Tag), ",")
		switch {
		case strings.Contains(flags, "remain"):
			remain = true
		case strings.Contains(flags, "squash"):
			sub, r := fields(f.Type)
			keys, remain = append(keys, sub...), remain || r
		case name != "" && name != "-":
			keys = append(keys, name)
		}
	}
	return keys, remain
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

// wholeNumberHook refuses a fractional number for an integer, which mapstructure truncates.
func wholeNumberHook(_ reflect.Type, to reflect.Type, data any) (any, error) {
	f, ok := data.(float64)
	switch to.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if ok && f != math.Trunc(f) {
			return nil, fmt.Errorf("want a whole number, got %v", f)
		}
	}
	return data, nil
}
