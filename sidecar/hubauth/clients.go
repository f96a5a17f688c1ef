package hubauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
)

// Registration is who may register clients (Config.Registration).
type Registration string

// The registration policies.
const (
	RegistrationOpen   Registration = "open"   // anyone (RFC 7591 open registration), within the rate and global bounds
	RegistrationToken  Registration = "token"  // who holds the initial access token (RFC 7591 section 3)
	RegistrationClosed Registration = "closed" // nobody: only the operator's Config.Clients; the metadata names no registration endpoint
)

// Registrations are the policies Config.Registration takes.
var Registrations = []Registration{RegistrationOpen, RegistrationToken, RegistrationClosed}

// Defaults of a registration's Config.
const (
	DefaultRegistration    = RegistrationOpen
	DefaultRegistrationTTL = 24 * time.Hour // a client no user approved within it registers again
	// RegistrationLoginWindow is how long a registered client no user approved is kept,
	// besides while a user's login for it is at its consent page: a client registers to
	// log in at once. A local process that filled the waiting clients with forged sources
	// closed the registration to everyone for RegistrationTTL (red team of issue 39, pass
	// 11, M2).
	RegistrationLoginWindow = 10 * time.Minute
)

// minRegistrationToken is the shortest initial access token New takes, in bytes.
const minRegistrationToken = 16

// Client is a client the operator registers (Config.Clients).
type Client struct {
	ID           string   // its client_id: 1 to 128 of A-Z a-z 0-9 . _ ~ -
	Name         string   // shown on the consent page
	RedirectURIs []string // as a registration's (CheckRedirectURI)
}

// CheckClient reports why c cannot be an operator's client with the allowed short
// schemes, nil if it can.
func CheckClient(c Client, allowed []string) error {
	if c.ID == "" || len(c.ID) > 128 || strings.ContainsFunc(c.ID, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("._~-", r))
	}) {
		return fmt.Errorf("client_id must be 1 to 128 of A-Z a-z 0-9 . _ ~ -, got %q", c.ID)
	}
	if c.Name != cleanName(c.Name) {
		return fmt.Errorf("client %s: client_name must be at most %d bytes of printable text, got %q", c.ID, maxNameLen, c.Name)
	}
	if err := checkRedirectURIs(c.RedirectURIs, allowed); err != nil {
		return fmt.Errorf("client %s: %w", c.ID, err)
	}
	return nil
}

// registration checks the registration keys of cfg and returns the operator's clients
// by id.
func (cfg *Config) registration() (map[string]client, error) {
	if cfg.Registration == "" {
		cfg.Registration = DefaultRegistration
	}
	switch cfg.Registration {
	case RegistrationToken:
		if len(cfg.RegistrationToken) < minRegistrationToken {
			return nil, fmt.Errorf("%w: registration %q needs a RegistrationToken of at least %d bytes", ErrConfig, cfg.Registration, minRegistrationToken)
		}
	case RegistrationOpen, RegistrationClosed:
	default:
		return nil, fmt.Errorf("%w: registration must be one of %v, got %q", ErrConfig, Registrations, cfg.Registration)
	}
	for _, s := range cfg.AllowedRedirectSchemes {
		if err := CheckAllowedScheme(s); err != nil {
			return nil, fmt.Errorf("%w: allowed redirect schemes: %v", ErrConfig, err)
		}
	}
	static := make(map[string]client, len(cfg.Clients))
	for _, c := range cfg.Clients {
		if err := CheckClient(c, cfg.AllowedRedirectSchemes); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrConfig, err)
		}
		if _, dup := static[c.ID]; dup {
			return nil, fmt.Errorf("%w: client_id %s registered twice", ErrConfig, c.ID)
		}
		static[c.ID] = client{name: c.Name, redirectURIs: c.RedirectURIs}
	}
	return static, nil
}

// checkRedirectURIs checks a client's redirect URIs: 1 to maxRedirectURIs, each one it
// may register.
func checkRedirectURIs(uris, allowed []string) error {
	if len(uris) == 0 || len(uris) > maxRedirectURIs {
		return fmt.Errorf("1 to %d redirect_uris", maxRedirectURIs)
	}
	total := 0
	for _, u := range uris {
		total += len(u)
	}
	if total > maxRedirectBytes {
		return fmt.Errorf("redirect_uris of %d bytes together, at most %d", total, maxRedirectBytes)
	}
	for _, u := range uris {
		if err := CheckRedirectURI(u, allowed); err != nil {
			return err
		}
	}
	return nil
}

// checkRedirectURIs checks a registration's redirect URIs.
func (s *Server) checkRedirectURIs(uris []string) error {
	return checkRedirectURIs(uris, s.cfg.AllowedRedirectSchemes)
}

// initialAccess reports whether r carries the initial access token (Authorization:
// Bearer), compared in constant time (of digests: the length is not told either).
func (s *Server) initialAccess(r *http.Request) bool {
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	got, want := sha256.Sum256([]byte(strings.TrimSpace(tok))), sha256.Sum256([]byte(s.cfg.RegistrationToken))
	return strings.EqualFold(scheme, "bearer") && subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// cleanName is a client's name as the sidecar keeps and shows it: valid UTF-8 without
// control characters, format characters (Unicode category Cf: the bidi embeddings,
// overrides, isolates and marks among them, U+202A–U+202E, U+2066–U+2069, U+200E,
// U+200F, U+061C, which would reorder the page's text around it) or line and paragraph
// separators, with at most maxMarks combining marks on a character (90 stacked marks drew
// a column over the page's other lines: red team of issue 39, pass 10, L3), trimmed of
// space, at most maxNameLen bytes (whole characters).
// maxMarks is how many combining marks a character of a client's name keeps: enough for
// the scripts that stack them (Vietnamese, Devanagari, Hebrew points), not for a tower.
const maxMarks = 3

func cleanName(name string) string {
	var b strings.Builder
	space, marks := false, 0
	for _, r := range strings.ToValidUTF8(name, "") {
		switch {
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2800' || // Braille's blank
			unicode.In(r, unicode.Zl, unicode.Zp, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector):
			continue
		case unicode.In(r, unicode.Mn, unicode.Me): // at most maxMarks on one character
			if marks == maxMarks {
				continue
			}
			marks++
		case unicode.Is(unicode.Zs, r): // every space one ASCII space, runs of them one
			if space {
				continue
			}
			r, space, marks = ' ', true, 0
		default:
			space, marks = false, 0
		}
		if b.Len()+utf8.RuneLen(r) > maxNameLen {
			break
		}
		b.WriteRune(r)
	}
	return strings.TrimSpace(b.String())
}

// registeredText says when a client registered, as of now, for the consent page:
// "registered 3 minutes ago, 2026-12-06 10:01 UTC".
func registeredText(at, now time.Time) string {
	if at.IsZero() {
		return "registered by the Hub's operator"
	}
	ago := "just now"
	switch d := now.Sub(at); {
	case d >= 48*time.Hour:
		ago = fmt.Sprintf("%d days ago", int(d/(24*time.Hour)))
	case d >= 2*time.Hour:
		ago = fmt.Sprintf("%d hours ago", int(d/time.Hour))
	case d >= 2*time.Minute:
		ago = fmt.Sprintf("%d minutes ago", int(d/time.Minute))
	case d >= time.Minute:
		ago = "a minute ago"
	}
	return "registered " + ago + ", " + at.UTC().Format("2006-01-02 15:04 UTC")
}

// logAMinute logs msg at level unless it did less than a minute ago (last: when, in
// unix seconds): a flood of refusals writes a line a minute.
func (s *Server) logAMinute(last *atomic.Int64, level slog.Level, msg string, args ...any) {
	now, prev := s.now().Unix(), last.Load()
	if now-prev >= 60 && last.CompareAndSwap(prev, now) {
		s.log.Log(context.Background(), level, msg, args...)
	}
}
