// Package keyerr is how a library refuses a value of its configuration: a *KeyError that
// names the field by its key in snake case, wrapping ErrInvalid, which sidecar/config
// renames (Rekey) to the key of the daemon's configuration that maps onto the field. It
// is below every layer, so that each library, ystore's too, validates its own keys.
package keyerr

import (
	"errors"
	"fmt"
)

// ErrInvalid is wrapped by resources/option's decoder for a value of the wrong type or
// that does not parse, and by a library's validation of its configuration (Invalid): the one
// sentinel of a configuration value refused (config.ErrInvalid is the same value).
var ErrInvalid = errors.New("invalid value")

// KeyError is a problem with one key, named by its dotted path (store.sqlite.path,
// max_retries, headers[X]): "key: message".
type KeyError struct {
	Key string
	Msg string
	Err error // the sentinel it wraps: ErrInvalid, resources/option's ErrUnknown or the caller's own
}

// Error returns "key: message".
func (e *KeyError) Error() string { return e.Key + ": " + e.Msg }

// Unwrap returns the sentinel.
func (e *KeyError) Unwrap() error { return e.Err }

// Invalid is the *KeyError of key's refused value, wrapping ErrInvalid: what a
// library's validation of its configuration returns, naming the field by the key the
// daemon's configuration maps onto it (sidecar/config prefixes its section).
func Invalid(key, format string, args ...any) *KeyError {
	return &KeyError{Key: key, Msg: fmt.Sprintf(format, args...), Err: ErrInvalid}
}

// Rekey is err with every *KeyError's key (joined or wrapped: errors.Join, %w)
// renamed by rename, which returns "" to drop the error; other errors unchanged.
func Rekey(err error, rename func(key string) string) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, Rekey(e, rename)...)
		}
		return out
	}
	var ke *KeyError
	if !errors.As(err, &ke) {
		return []error{err}
	}
	key := rename(ke.Key)
	if key == "" {
		return nil
	}
	return []error{&KeyError{Key: key, Msg: ke.Msg, Err: ke.Err}}
}
