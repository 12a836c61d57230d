package bus

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
)

// Redact returns the comma-separated server URLs fit for logs, errors and flag defaults: the
// password of user:password@ becomes ***, and so does a token (token@host), e.g.
// "nats://scheduler:***@nats:4222". It reads the URLs the way nats.go does (a URL without
// "://" is nats://), and shows a URL it cannot read as <invalid url>, so nothing of a badly
// written password leaks either.
func Redact(urls string) string {
	var out []string
	for _, p := range strings.Split(urls, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, redactOne(p))
		}
	}
	return strings.Join(out, ",")
}

// withScheme adds nats:// to a URL that has no scheme, as nats.go does.
func withScheme(s string) string {
	if !strings.Contains(s, "://") {
		return "nats://" + s
	}
	return s
}

// redactOne masks the user info of one URL. Everything before the last "@" is user info, as
// url.Parse and nats.go take it, even when a password holds an unescaped "/" or "@".
func redactOne(s string) string {
	s = withScheme(s)
	scheme, rest, _ := strings.Cut(s, "://")
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		userinfo, host := rest[:i], rest[i+1:]
		if user, _, ok := strings.Cut(userinfo, ":"); ok {
			return scheme + "://" + user + ":***@" + host
		}
		return scheme + "://***@" + host
	}
	u, err := url.Parse(s)
	if err != nil || !plainServer(u) {
		// e.g. "nats://user:pass" cut off at a comma in the password: never show it.
		return "<invalid url>"
	}
	return u.String()
}

// plainServer reports whether u is scheme://[userinfo@]host[:port] with a numeric port and
// nothing after it: all a NATS URL holds.
func plainServer(u *url.URL) bool {
	if u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Host == "" {
		return false
	}
	for _, r := range u.Port() {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// login is how the client proves who it is, from the URLs or the Config.
type login struct {
	user, password, token string
}

func (l login) empty() bool { return l == login{} }

// parseServers parses the comma-separated URLs and takes their user info out: the returned URLs
// carry none, and the client is given the credentials as nats.UserInfo or nats.Token, so no URL
// the client keeps, logs or reports holds a secret. Every URL that carries user info must carry
// the same. Errors name URLs only redacted.
func parseServers(urls string) (clean string, creds login, err error) {
	var parts, out []string
	for _, p := range strings.Split(urls, ",") {
		if p = strings.TrimSpace(p); p != "" {
			parts = append(parts, p)
		}
	}
	seen := false
	for i, p := range parts {
		// url.Error quotes the URL: errors name it by place and redacted only.
		shown := fmt.Sprintf("%d of %d (%s)", i+1, len(parts), redactOne(p))
		u, err := url.Parse(withScheme(p))
		if err != nil {
			if _, rerr := url.Parse(redactOne(p)); rerr != nil || redactOne(p) == "<invalid url>" {
				return "", login{}, fmt.Errorf("NATS URL %s is not a valid URL (scheme://[user:password@]host:port; a \",\" in a password must be percent-encoded)", shown)
			}
			return "", login{}, fmt.Errorf("NATS URL %s: its user info is not valid (percent-encode the password, or pass it in NATS_PASSWORD)", shown)
		}
		if !plainServer(u) {
			return "", login{}, fmt.Errorf("NATS URL %s is not scheme://[user:password@]host[:port] (no path, query or fragment)", shown)
		}
		var l login
		if u.User != nil {
			if pw, ok := u.User.Password(); ok {
				l = login{user: u.User.Username(), password: pw}
			} else {
				l = login{token: u.User.Username()} // nats.go takes a user without a password as a token
			}
			u.User = nil
		}
		if !l.empty() {
			if seen && l != creds {
				return "", login{}, fmt.Errorf("the NATS URLs %s carry different credentials: give one user and password", Redact(urls))
			}
			creds, seen = l, true
		}
		out = append(out, u.String())
	}
	if len(out) == 0 {
		return "", login{}, errors.New("no NATS URL")
	}
	return strings.Join(out, ","), creds, nil
}

// credentials settles how the client logs in: the URLs' user info, or Config.User with
// Config.Password or the contents of Config.PasswordFile, or the creds file. Giving two ways
// is refused rather than one silently winning.
func credentials(cfg Config, fromURL login) ([]nats.Option, error) {
	pw := cfg.Password
	if cfg.PasswordFile != "" {
		if pw != "" {
			return nil, errors.New("a NATS password and a NATS password file are both given: give one")
		}
		b, err := os.ReadFile(cfg.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("reading the NATS password file: %w", err)
		}
		if pw = strings.TrimRight(string(b), "\r\n"); pw == "" {
			return nil, fmt.Errorf("the NATS password file %s is empty", cfg.PasswordFile)
		}
	}
	given := login{user: cfg.User, password: pw}
	if pw != "" && cfg.User == "" {
		return nil, errors.New("a NATS password is given without a user")
	}
	switch {
	case !fromURL.empty() && !given.empty() && fromURL != given:
		return nil, errors.New("the NATS URL carries credentials and a NATS user and password are given too: give them once")
	case given.empty():
		given = fromURL
	}
	if cfg.CredsFile != "" && !given.empty() {
		return nil, errors.New("a NATS creds file and a user and password (or token) are both given: give one")
	}
	switch {
	case given.token != "":
		return []nats.Option{nats.Token(given.token)}, nil
	case given.user != "":
		return []nats.Option{nats.UserInfo(given.user, given.password)}, nil
	}
	return nil, nil
}

// URLFlag is a flag.Value for NATS server URLs held in *p whose String, which flag prints as
// the default in -h, is redacted: a default taken from NATS_URL may hold a password.
func URLFlag(p *string) flag.Value { return urlFlag{p} }

type urlFlag struct{ p *string }

func (f urlFlag) String() string {
	if f.p == nil {
		return ""
	}
	return Redact(*f.p)
}

func (f urlFlag) Set(s string) error {
	*f.p = s
	return nil
}
