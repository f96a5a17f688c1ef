package config

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/keyerr"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/names"
)

// ErrInvalid is wrapped by every validation error: keyerr.ErrInvalid, the one sentinel
// of a refused configuration value, whether the decoder, a library or this package
// refused it.
var ErrInvalid = keyerr.ErrInvalid

// KeyError is a problem with one configuration key, named by its dotted YAML path
// (store.sqlite.poll_interval): the one vocabulary of the decoder (resources/option: an
// unknown key, a value of the wrong type) and of the checks here (wrapping ErrInvalid).
type KeyError = keyerr.KeyError

// Backend names a store backend: store.backend, hub.stores.backend.
type Backend string

// The store backends, each with a section of its own in the configuration.
const (
	BackendPostgres Backend = "postgres"
	BackendSQLite   Backend = "sqlite"
)

// Backends are the store backends the configuration has a section for.
var Backends = []Backend{BackendPostgres, BackendSQLite}

// backend fails key unless b is one of Backends.
func (v *validator) backend(key string, b Backend) {
	if !slices.Contains(Backends, b) {
		names := make([]string, len(Backends))
		for i, n := range Backends {
			names[i] = string(n)
		}
		v.fail(key, "must be one of %s, got %q", strings.Join(names, ", "), b)
	}
}

// Names lists the implementations registered for each seam; CheckNames rejects a
// configured name missing from its list.
type Names struct {
	Publishers []string
	Gates      []string
	Verifiers  []string
	Extensions []string
	Hooks      []string
}

// validator collects KeyErrors in the order the checks run.
type validator struct{ errs []error }

func (v *validator) fail(key, format string, args ...any) {
	v.errs = append(v.errs, keyerr.Invalid(key, format, args...))
}

func (v *validator) oneOf(key, val string, allowed []string) {
	if !slices.Contains(allowed, val) {
		v.fail(key, "must be one of %s, got %q", strings.Join(allowed, ", "), val)
	}
}

func (v *validator) positive(key string, d time.Duration) {
	if d <= 0 {
		v.fail(key, "must be > 0, got %s", d)
	}
}

func (v *validator) exclusive(key, val, fileKey, file string) {
	if val != "" && file != "" {
		v.fail(key, "set either %s or %s, not both", key, fileKey)
	}
}

// Validate checks every value and returns all problems joined, each a *KeyError naming
// its key; it does not check registered names (see CheckNames) or read secret files.
// It checks the configuration as written: call it before ResolveSecrets, which fills a
// secret from its file and so sets both.
func (c Config) Validate() error {
	v := &validator{}
	v.oneOf("log.level", c.Log.Level, []string{"debug", "info", "warn", "error"})
	v.oneOf("log.format", c.Log.Format, []string{"text", "json"})

	s := c.Store
	v.backend("store.backend", s.Backend)
	v.positive("store.lag_threshold", s.LagThreshold)
	if s.Backend == BackendSQLite && s.SQLite.Path == "" {
		v.fail("store.sqlite.path", "must not be empty with store.backend sqlite")
	}
	if (s.Backend == BackendPostgres || c.Hub.Enabled && c.Hub.Stores.Backend == BackendPostgres) && s.Postgres.DSN == "" && s.Postgres.DSNFile == "" {
		v.fail("store.postgres.dsn", "must be set (or store.postgres.dsn_file) with store.backend or hub.stores.backend postgres")
	}
	v.exclusive("store.postgres.dsn", s.Postgres.DSN, "store.postgres.dsn_file", s.Postgres.DSNFile)

	api := c.FileID.API
	v.exclusive("fileid.api.token", api.Token, "fileid.api.token_file", api.TokenFile)

	c.Server.validate(v)
	v.libraries(c)
	c.Hub.validate(v, c.Server)
	if c.Hub.Enabled && c.Publisher.Name == "sse" {
		// Every tenant builds its own publisher: the first to load holds the one
		// listener address, and every other user's tenant fails to start.
		v.fail("publisher.name", "sse listens on one address, so it cannot serve every hub user's tenant: use pgnotify or webhook in hub mode")
	}

	for _, name := range slices.Sorted(maps.Keys(c.Notebooks)) {
		if err := names.ValidateName(name); err != nil {
			v.fail("notebooks."+name, "%v", err)
		}
		if _, err := names.CleanPath(c.Notebooks[name]); err != nil {
			v.fail("notebooks."+name, "%v", err)
		}
	}

	n := c.Notifications
	if n.Debounce < 0 {
		v.fail("notifications.debounce", "must be >= 0, got %s", n.Debounce)
	}
	if n.MaxDelay < n.Debounce {
		v.fail("notifications.max_delay", "must be >= notifications.debounce (%s), got %s", n.Debounce, n.MaxDelay)
	}

	for _, sec := range c.secrets() { // a blank secret is refused like a blank secret file
		if *sec.val != "" && strings.TrimSpace(*sec.val) == "" {
			v.fail(sec.key, "is only white space; set a value or leave it empty")
		}
	}

	v.exclusive("ship.postgres.dsn", c.Ship.Postgres.DSN, "ship.postgres.dsn_file", c.Ship.Postgres.DSNFile)
	return errors.Join(v.errs...)
}

func (s Server) validate(v *validator) {
	// A secret and its file are the configuration's own pair: no library reads the file.
	v.exclusive("server.token", s.Token, "server.token_file", s.TokenFile)
}

// libraries adds the refusals of the libraries' own validation of what the
// configuration maps onto them (libconfig.go), each named by its key: a key is
// validated once, by the library that owns it (libraryKeys).
func (v *validator) libraries(c Config) {
	seen := map[string]bool{}
	for _, lib := range c.libraryChecks() {
		v.errs = append(v.errs, keyerr.Rekey(lib.err, func(field string) string {
			base, index := field, ""
			if i := strings.IndexByte(field, '['); i >= 0 {
				base, index = field[:i], field[i:]
			}
			key := lib.keys[base]
			if key == "" || seen[key+index] {
				return ""
			}
			seen[key+index] = true
			return key + index
		})...)
	}
}

// ValidateShip checks what ship mode needs beyond Validate: a SQLite source and a
// Postgres destination.
func (c Config) ValidateShip() error {
	v := &validator{}
	if c.Store.Backend != BackendSQLite {
		v.fail("store.backend", "ship reads a sqlite store, got %q", c.Store.Backend)
	}
	if c.Ship.Postgres.DSN == "" && c.Ship.Postgres.DSNFile == "" {
		v.fail("ship.postgres.dsn", "must be set (or ship.postgres.dsn_file) to ship")
	}
	return errors.Join(v.errs...)
}

// CheckNames rejects publisher, gate, verifier, extension and hook names that
// are not registered; "" is the default publisher and no gate.
func (c Config) CheckNames(n Names) error {
	v := &validator{}
	known := func(key, name string, names []string) {
		switch {
		case slices.Contains(names, name):
		case len(names) == 0:
			v.fail(key, "unknown name %q (none registered)", name)
		default:
			v.fail(key, "unknown name %q (registered: %s)", name, strings.Join(names, ", "))
		}
	}
	if c.Publisher.Name != "" {
		known("publisher.name", c.Publisher.Name, n.Publishers)
	}
	if c.Gate.Name != "" {
		known("gate.name", c.Gate.Name, n.Gates)
	}
	known("server.verifier.name", c.Server.Verifier.Name, n.Verifiers)
	for _, name := range slices.Sorted(maps.Keys(c.Extensions)) {
		known("extensions."+name, name, n.Extensions)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Hooks)) {
		known("hooks."+name, name, n.Hooks)
	}
	return errors.Join(v.errs...)
}
