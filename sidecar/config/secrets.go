package config

import (
	"fmt"
	"maps"
	"net/url"
	"os"
	"regexp"
	"strings"
)

// Mask replaces secret values in Masked output.
const Mask = "xxxxx" // as url.URL.Redacted

// secret is one value that may instead come from a file.
type secret struct {
	key, fileKey string
	val, file    *string
}

func (c *Config) secrets() []secret {
	return []secret{
		{"store.postgres.dsn", "store.postgres.dsn_file", &c.Store.Postgres.DSN, &c.Store.Postgres.DSNFile},
		{"fileid.api.token", "fileid.api.token_file", &c.FileID.API.Token, &c.FileID.API.TokenFile},
		{"server.token", "server.token_file", &c.Server.Token, &c.Server.TokenFile},
		{"ship.postgres.dsn", "ship.postgres.dsn_file", &c.Ship.Postgres.DSN, &c.Ship.Postgres.DSNFile},
		{"hub.api_token", "hub.api_token_file", &c.Hub.APIToken, &c.Hub.APITokenFile},
		{"hub.oauth.registration_token", "hub.oauth.registration_token_file", &c.Hub.OAuth.RegistrationToken, &c.Hub.OAuth.RegistrationTokenFile},
	}
}

// ResolveSecrets reads every *_file secret (token_file, dsn_file) into its value, trimmed
// of surrounding white space, leaving the *_file key as it is; an unreadable or empty file
// is an error naming the key. Validate first: afterwards both value and file are set.
func (c *Config) ResolveSecrets() error {
	for _, s := range c.secrets() {
		if *s.file == "" {
			continue
		}
		b, err := os.ReadFile(*s.file)
		if err != nil {
			return &KeyError{Key: s.fileKey, Msg: fmt.Sprintf("reading secret: %v", err), Err: ErrInvalid}
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			return &KeyError{Key: s.fileKey, Msg: fmt.Sprintf("secret file %s is empty", *s.file), Err: ErrInvalid}
		}
		*s.val = v
	}
	return nil
}

var (
	secretOptionRe = regexp.MustCompile(`(?i)(token|secret|password|passwd|dsn|key|auth|credential)`)
	dsnPasswordRe  = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)
)

// Masked returns a copy safe to print: tokens masked, DSN passwords masked, and plugin
// options whose key looks secret (token, password, dsn, key, …) masked.
func (c Config) Masked() Config {
	m := c
	for _, s := range m.secrets() {
		if *s.val == "" {
			continue
		}
		if strings.HasSuffix(s.key, ".dsn") {
			*s.val = MaskDSN(*s.val)
		} else {
			*s.val = Mask
		}
	}
	m.Server.Verifier.Options = maskOptions(c.Server.Verifier.Options)
	m.Publisher.Options = maskOptions(c.Publisher.Options)
	m.Gate.Options = maskOptions(c.Gate.Options)
	m.Extensions = maskNamed(c.Extensions)
	m.Hooks = maskNamed(c.Hooks)
	m.Notebooks = maps.Clone(c.Notebooks)
	return m
}

// MaskDSN masks the password of a Postgres URL or keyword/value connection string.
func MaskDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		q := u.Query()
		if q.Has("password") {
			q.Set("password", Mask)
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	return dsnPasswordRe.ReplaceAllString(dsn, "${1}"+Mask)
}

func maskNamed(in map[string]map[string]any) map[string]map[string]any {
	if in == nil {
		return nil
	}
	out := make(map[string]map[string]any, len(in))
	for k, v := range in {
		out[k] = maskOptions(v)
	}
	return out
}

func maskOptions(in map[string]any) map[string]any {
	if in == nil {
		return nil
	}
	out := make(map[string]any, len(in))
	for k, v := range in {
		switch val := v.(type) {
		case map[string]any:
			out[k] = maskOptions(val)
		default:
			if secretOptionRe.MatchString(k) && v != nil && v != "" {
				out[k] = Mask
			} else {
				out[k] = v
			}
		}
	}
	return out
}
