package bus

import (
	"net/url"
	"strings"
)

// Redact returns the comma-separated server URLs with any password masked, for logs and errors:
// a NATS URL may carry a service's password (the deployments build it from a Secret).
func Redact(urls string) string {
	clean, _, _ := splitCredentials(urls)
	return clean
}

// splitCredentials takes the user and password out of the URLs: the client is given them as
// nats.UserInfo, so no URL it keeps, logs or reports holds the password. The first URL with
// user info supplies them.
func splitCredentials(urls string) (clean, user, pass string) {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil {
			parts[i] = "<unparsable url>"
			continue
		}
		if u.User != nil {
			if user == "" {
				user = u.User.Username()
				pass, _ = u.User.Password()
			}
			u.User = nil
		}
		parts[i] = u.String()
	}
	return strings.Join(parts, ","), user, pass
}
