package hubauth

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
)

// The redirect URIs a client may register, after RFC 8252 (OAuth 2.0 for native apps)
// and the MCP authorization: https; http on a loopback host (a native app's own
// listener, section 7.3); a private-use scheme in reverse-domain form (section 7.1:
// com.example.app:/callback), which names one application; and the few short schemes
// the Hub's operator allows (Config.AllowedRedirectSchemes: vscode, cursor). Every other
// scheme is refused: a short one may be a browser's own (microsoft-edge:,
// googlechromes:, x-safari-https:, firefox:), which loads the URL it is handed, code
// included, from the network.

// CheckRedirectURI reports why a client may not register raw as a redirect URI, nil if
// it may; allowed are the short private-use schemes the operator allows besides the
// reverse-domain ones.
func CheckRedirectURI(raw string, allowed []string) error {
	u, err := url.Parse(raw)
	switch {
	case len(raw) > maxURILen:
		return fmt.Errorf("redirect URI longer than %d bytes", maxURILen)
	case err != nil || !u.IsAbs():
		return fmt.Errorf("redirect URI must be absolute: %q", raw)
	case u.Fragment != "" || strings.Contains(raw, "#") || u.User != nil:
		return fmt.Errorf("redirect URI must have no fragment or user info: %q", raw)
	case strings.IndexFunc(raw, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0:
		// RFC 3986: an international host in its IDNA (xn--) form, anything else
		// percent-encoded; so the consent page shows no look-alike host and no bidi or
		// invisible character.
		return fmt.Errorf("redirect URI must be ASCII without spaces (percent-encoded, hosts in their xn-- form): %q", raw)
	}
	switch scheme := strings.ToLower(u.Scheme); {
	case scheme == "https":
		if u.Host == "" {
			return fmt.Errorf("redirect URI without a host: %q", raw)
		}
	case scheme == "http":
		if h := u.Hostname(); h != "localhost" && !isLoopback(h) {
			return fmt.Errorf("http redirect URIs must be on a loopback host: %q", raw)
		}
		if !canonicalPort(u) {
			return fmt.Errorf("http redirect URIs need a port from 1 to 65535, written without a leading zero: %q", raw)
		}
	case slices.Contains(allowed, scheme):
	case reverseDomain(scheme) && !refusedScheme(scheme):
	default:
		return fmt.Errorf("redirect URI scheme %q refused: use https, http on a loopback address, or an application's "+
			"private-use scheme in reverse-domain form (com.example.app:/callback); short schemes only as the Hub's operator allows them", scheme)
	}
	return nil
}

// CheckAllowedScheme reports why an operator may not allow the short private-use scheme
// s (Config.AllowedRedirectSchemes), nil if they may: a scheme (RFC 3986), lower
// case, that no browser or system resolves itself.
func CheckAllowedScheme(s string) error {
	u, err := url.Parse(s + ":x")
	switch {
	case err != nil || u.Scheme != s || s != strings.ToLower(s):
		return fmt.Errorf("%q is not a URI scheme in lower case", s)
	case s == "http" || s == "https":
		return fmt.Errorf("%q needs no allowing: https and http on a loopback host are always allowed", s)
	case refusedScheme(s):
		return fmt.Errorf("%q is a browser's or the system's own scheme, not an application's", s)
	}
	return nil
}

// reverseDomain reports a scheme in RFC 8252's reverse-domain form: two or more
// labels between dots, none empty.
func reverseDomain(scheme string) bool {
	labels := strings.Split(scheme, ".")
	return len(labels) >= 2 && !slices.Contains(labels, "")
}

// refusedScheme reports a scheme that a browser or the system resolves itself (to the
// network, a browser, a handler of a web page's, a document), never an MCP client's
// own: a code sent there leaves the user's machine or lands in a document. No browser
// we know of takes a reverse-domain scheme: the browsers' families (firefox-focus,
// opera-https, …) are matched by prefix among short schemes only, so that an
// application's operations.example.app: stays its own; the browsers' namespaces
// (chrome-…, web+…) and the exact list apply to every scheme.
func refusedScheme(scheme string) bool {
	if refusedSchemes[scheme] || strings.HasPrefix(scheme, "chrome") || strings.HasPrefix(scheme, "web+") {
		return true
	}
	if strings.Contains(scheme, ".") {
		return false
	}
	for _, browser := range []string{"microsoft-edge", "x-safari", "googlechrome", "firefox", "opera", "brave"} {
		if strings.HasPrefix(scheme, browser) {
			return true
		}
	}
	return false
}

// refusedSchemes are schemes of the network, of documents and of browsers (iOS and
// Android browsers take a URL to open through these: googlechromes://host/path,
// x-safari-https://…, firefox://open-url?url=…, touch-https://…).
var refusedSchemes = map[string]bool{
	"javascript": true, "data": true, "file": true, "vbscript": true, "blob": true, "about": true, "filesystem": true,
	"view-source": true, "intent": true, "edge": true, "moz-extension": true, "safari": true, "ddgquicklink": true, "duckduckgo": true,
	"touch-http": true, "touch-https": true, "ohttp": true, "ohttps": true, "yandexbrowser-open-url": true, "samsunginternet": true,
	"ftp": true, "ftps": true, "sftp": true, "tftp": true, "ws": true, "wss": true, "gopher": true, "ldap": true, "ldaps": true,
	"mailto": true, "news": true, "nntp": true, "snews": true, "telnet": true, "ssh": true, "irc": true, "ircs": true,
	"smb": true, "nfs": true, "afp": true, "webdav": true, "dav": true, "git": true, "svn": true, "rtsp": true, "rtmp": true,
	"sip": true, "sips": true, "xmpp": true, "tel": true, "sms": true, "mms": true, "magnet": true, "ipfs": true, "ipns": true,
	"urn": true, "tag": true, "geo": true, "market": true, "itms": true, "itms-apps": true, "ms-settings": true,
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
