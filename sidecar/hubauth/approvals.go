package hubauth

import (
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Approvals. A user approves a client for one redirect URI: the approval covers that
// URI only (for http on a loopback IP literal, any port of it, as RFC 8252 section 7.3
// asks of a native app's listener), so a client that registered a second redirect URI
// cannot have a code sent there on the strength of the first one's approval: an
// authorization request naming a URI the user has not approved for the client shows
// the consent page again, with that URI on it.

// DefaultMaxApprovals is Config.MaxApprovals: the approvals one user holds at once.
const DefaultMaxApprovals = 50

// approval is a client a user approved for one redirect URI.
type approval struct {
	clientID    string
	name        string
	redirectURI string // as the user saw it on the consent page
	at          time.Time
}

// approvalKey keys an approval by user, client and redirectKey (client IDs are
// base64url and users' names hold no NUL: a key splits one way only).
func approvalKey(user, clientID, redirectURI string) string {
	return approvalPrefix(user, clientID) + redirectKey(redirectURI)
}

// approvalPrefix is the start of the keys of user's approvals of clientID ("": of
// every client).
func approvalPrefix(user, clientID string) string {
	if clientID == "" {
		return user + "\x00"
	}
	return user + "\x00" + clientID + "\x00"
}

// redirectKey is what an approval of redirectURI is bound to: the URI itself, but for
// http on a loopback IP literal without its port (sameButPort's match).
func redirectKey(redirectURI string) string {
	u, err := url.Parse(redirectURI)
	if err != nil || !loopbackHTTP(u, redirectURI) {
		return redirectURI
	}
	return "http://" + u.Hostname() + u.EscapedPath() + "?" + u.RawQuery
}

// loopbackHTTP reports whether u (parsed from raw) is an http URL on a loopback IP
// literal whose port a client may choose: written in lower case, a port a listener can
// have if any (1-65535, no leading zero), no user info, no fragment.
func loopbackHTTP(u *url.URL, raw string) bool {
	return strings.HasPrefix(raw, "http://") && isLoopback(u.Hostname()) && canonicalPort(u) &&
		u.User == nil && u.Opaque == "" && !strings.Contains(raw, "#")
}

// canonicalPort reports whether u's host is its name and, if it has one, a port a
// listener can have, written as strconv writes it: not ":", ":0", ":99999" nor ":033418".
func canonicalPort(u *url.URL) bool {
	host := u.Hostname()
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	p := u.Port()
	if p == "" {
		return u.Host == host
	}
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535 && strconv.Itoa(n) == p && u.Host == host+":"+p
}

// approved reports whether user approved clientID for redirectURI.
func (s *Server) approved(user, clientID, redirectURI string) bool {
	_, ok := s.granted.get(approvalKey(user, clientID, redirectURI))
	return ok
}

// approvals are user's approvals, the oldest first.
func (s *Server) approvals(user string) []approval {
	var list []approval
	s.granted.each(approvalPrefix(user, ""), func(a approval) { list = append(list, a) })
	sort.Slice(list, func(i, j int) bool { return list[i].at.Before(list[j].at) })
	return list
}

// grant remembers user's approval a. At the user's bound her oldest approvals are
// forgotten first (their tokens end), so one user's approvals never push out
// another's; false when every user's together are at their bound.
func (s *Server) grant(user string, a approval) bool {
	if !s.approved(user, a.clientID, a.redirectURI) {
		list := s.approvals(user)
		for i := 0; i <= len(list)-s.cfg.MaxApprovals; i++ {
			s.revokeApproval(user, list[i].clientID, list[i].redirectURI)
		}
	}
	return s.granted.put(approvalKey(user, a.clientID, a.redirectURI), a, 0)
}

// revokeApproval forgets user's approval of clientID for redirectURI and ends every
// token of user's that clientID holds, whichever redirect URI it came through; false
// when there was no such approval.
func (s *Server) revokeApproval(user, clientID, redirectURI string) bool {
	if _, ok := s.granted.take(approvalKey(user, clientID, redirectURI)); !ok {
		return false
	}
	s.tokens.revokeWhere(func(f *family) bool { return f.user == user && f.clientID == clientID }, s.metrics.revoked.WithLabelValues("approval_revoked"))
	s.log.Info("oauth client approval revoked")
	s.release(clientID)
	return true
}

// release hands a client no user approves any more back to those waiting for an
// approval (which expire), so that approving and revoking cannot fill the clients kept
// for the process's life; an operator's client stays.
func (s *Server) release(clientID string) {
	held := false
	s.granted.each("", func(a approval) { held = held || a.clientID == clientID })
	if held {
		return
	}
	if c, ok := s.kept.take(clientID); ok {
		// Back among the waiting on the short clock: approved, then pushed out or revoked,
		// a client was kept for RegistrationTTL, and one user approving and dropping
		// clients kept the waiting full for a day (red team of issue 39, pass 13, M5).
		s.clients.put(clientID, c, min(RegistrationLoginWindow, s.cfg.RegistrationTTL))
	}
}
