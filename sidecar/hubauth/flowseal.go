package hubauth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// The login's leg at the Hub. A login in progress is held by no store of the Server:
// its flow travels, sealed (AES-256-GCM under a key of this process), in the state the
// Hub hands back at oauth_callback, with its deadline and a digest of the secret of
// the browser that started it (the cookie loginCookie). So logins in progress cost the
// Server nothing a flood could fill, and the callback is taken only from the browser
// that went to authorize: a page of the Hub's origin that has a user's browser follow
// the authorize link by script and reads where it ends cannot finish the login in
// another browser.

// loginCookie holds the browser's secret the logins it starts are bound to. Lax: it
// comes back on the top-level navigation from the Hub to oauth_callback whatever site
// started the login (an MCP client opens the authorize link from anywhere).
const loginCookie = "jupyter-mcp-sidecar-login"

// errFlow is an oauth_callback state that is not a flow of this process's, or one past
// its deadline.
var errFlow = errors.New("unknown or expired login")

// sealedFlow is a flow as its state carries it.
type sealedFlow struct {
	ClientID    string `json:"c,omitempty"`
	RedirectURI string `json:"r,omitempty"`
	State       string `json:"s,omitempty"`
	Challenge   string `json:"x,omitempty"`
	Scope       string `json:"o,omitempty"`
	HubVerifier string `json:"v"`
	Manage      bool   `json:"m,omitempty"`
	Browser     string `json:"b"` // hash of the browser's loginCookie
	Deadline    int64  `json:"d"` // unix seconds
}

// newSealer is the AEAD flows are sealed with, under a new random key.
func newSealer() cipher.AEAD {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (Go 1.24)
	block, _ := aes.NewCipher(key)
	aead, _ := cipher.NewGCM(block)
	return aead
}

// seal is the Hub's state for f, started by the browser whose secret is browser.
func (s *Server) seal(f flow, browser string) string {
	b, _ := json.Marshal(sealedFlow{ClientID: f.clientID, RedirectURI: f.redirectURI, State: f.state, Challenge: f.challenge,
		Scope: f.scope, HubVerifier: f.hubVerifier, Manage: f.manage, Browser: hash(browser), Deadline: s.now().Add(s.cfg.FlowTTL).Unix()})
	nonce := make([]byte, s.sealer.NonceSize())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(s.sealer.Seal(nonce, nonce, b, nil))
}

// open is the flow of the Hub's state, and the digest of the browser secret it is
// bound to; errFlow for a state this process did not seal or past its deadline.
func (s *Server) open(state string) (flow, string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(state)
	n := s.sealer.NonceSize()
	if err != nil || len(raw) < n {
		return flow{}, "", errFlow
	}
	b, err := s.sealer.Open(nil, raw[:n], raw[n:], nil)
	var sf sealedFlow
	if err != nil || json.Unmarshal(b, &sf) != nil || s.now().Unix() > sf.Deadline {
		return flow{}, "", errFlow
	}
	return flow{clientID: sf.ClientID, redirectURI: sf.RedirectURI, state: sf.State, challenge: sf.Challenge, scope: sf.Scope,
		hubVerifier: sf.HubVerifier, manage: sf.Manage}, sf.Browser, nil
}

// browserSecret is the secret of the browser r comes from, set in a new cookie on w
// when it has none.
func (s *Server) browserSecret(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(loginCookie); err == nil && len(ck.Value) == randomLen {
		return ck.Value // the browser's other logins stay valid
	}
	secret := random()
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: secret, Path: s.base + "/", HttpOnly: true,
		Secure: s.secure, SameSite: http.SameSiteLaxMode, MaxAge: int((s.cfg.FlowTTL + time.Minute).Seconds())})
	return secret
}

// sameBrowser reports whether r comes from the browser whose secret's digest is want:
// any of its cookies of that name, since a page of the origin may set another one of a
// narrower path, which the browser sends first (cookie tossing).
func sameBrowser(r *http.Request, want string) bool {
	for _, ck := range r.CookiesNamed(loginCookie) {
		if equal(hash(ck.Value), want) {
			return true
		}
	}
	return false
}
