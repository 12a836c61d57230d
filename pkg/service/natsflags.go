package service

import (
	"errors"
	"flag"

	"github.com/fleetwright/fleetwright/pkg/bus"
)

// NATSOptions say how to reach NATS and log in: the flags every service and the CLI take, under
// the same names (NATS_URL, NATS_USER, NATS_PASSWORD, NATS_PASSWORD_FILE, NATS_CREDS, NATS_CA,
// NATS_CERT, NATS_KEY, NATS_TLS_SERVER_NAME).
type NATSOptions struct {
	NATSURL string
	// NATSUser, with NATSPassword or the contents of NATSPasswordFile, logs in to NATS
	// (nats.UserInfo). The password is never a flag: a flag's value shows in ps and in -h.
	NATSUser         string
	NATSPassword     string
	NATSPasswordFile string
	NATSCreds        string
	NATSCA           string
	NATSCert         string
	NATSKey          string
	// NATSTLSServerName is the name the server's certificate is checked for, when it is not
	// the URL's host: through `kubectl port-forward` the URL is 127.0.0.1 and the certificate
	// is for nats.fleetwright.svc.
	NATSTLSServerName string
}

// RegisterNATS adds the NATS flags to fs, each defaulting to its environment variable as
// lookup finds it (LookupWith: the old names too); the URL defaults to defURL.
func (n *NATSOptions) RegisterNATS(fs *flag.FlagSet, lookup func(string) (string, bool), defURL string) {
	get := func(key, def string) string {
		if v, ok := lookup(key); ok {
			return v
		}
		return def
	}
	n.NATSURL = get("NATS_URL", defURL)
	fs.Var(bus.URLFlag(&n.NATSURL), "nats-url", "NATS server `URL`(s), comma separated; shown with any password masked (env NATS_URL)")
	fs.StringVar(&n.NATSUser, "nats-user", get("NATS_USER", ""), "NATS user, whose password is in env NATS_PASSWORD or --nats-password-file (env NATS_USER)")
	n.NATSPassword = get("NATS_PASSWORD", "")
	fs.StringVar(&n.NATSPasswordFile, "nats-password-file", get("NATS_PASSWORD_FILE", ""), "file holding the NATS user's password, instead of env NATS_PASSWORD (env NATS_PASSWORD_FILE)")
	fs.StringVar(&n.NATSCreds, "nats-creds", get("NATS_CREDS", ""), "NATS credentials file (JWT and nkey seed) instead of a user and password (env NATS_CREDS)")
	fs.StringVar(&n.NATSCA, "nats-ca", get("NATS_CA", ""), "CA bundle to verify the NATS server's certificate (env NATS_CA)")
	fs.StringVar(&n.NATSCert, "nats-cert", get("NATS_CERT", ""), "client certificate for NATS (env NATS_CERT)")
	fs.StringVar(&n.NATSKey, "nats-key", get("NATS_KEY", ""), "client key for NATS (env NATS_KEY)")
	fs.StringVar(&n.NATSTLSServerName, "nats-tls-server-name", get("NATS_TLS_SERVER_NAME", ""),
		"name to check the NATS server's certificate for, when it is not the URL's host, e.g. nats.fleetwright.svc through a port-forward (env NATS_TLS_SERVER_NAME)")
}

// ValidateNATS checks the NATS flags: a URL, and one way to log in.
func (n NATSOptions) ValidateNATS() error {
	var errs []error
	if n.NATSURL == "" {
		errs = append(errs, errors.New("--nats-url is required"))
	}
	if n.NATSPassword != "" && n.NATSPasswordFile != "" {
		errs = append(errs, errors.New("NATS_PASSWORD and --nats-password-file are both set: give the password once"))
	}
	if (n.NATSPassword != "" || n.NATSPasswordFile != "") && n.NATSUser == "" {
		errs = append(errs, errors.New("a NATS password (NATS_PASSWORD or --nats-password-file) needs --nats-user (NATS_USER)"))
	}
	if n.NATSUser != "" && n.NATSCreds != "" {
		errs = append(errs, errors.New("--nats-user and --nats-creds are two ways to log in to NATS: give one"))
	}
	if (n.NATSCert == "") != (n.NATSKey == "") {
		errs = append(errs, errors.New("--nats-cert and --nats-key go together"))
	}
	return errors.Join(errs...)
}

// BusConfig is the connection part of a bus.Config: URL, login and TLS.
func (n NATSOptions) BusConfig() bus.Config {
	return bus.Config{
		URL: n.NATSURL, User: n.NATSUser, Password: n.NATSPassword, PasswordFile: n.NATSPasswordFile, CredsFile: n.NATSCreds,
		TLS: bus.TLSConfig{CA: n.NATSCA, Cert: n.NATSCert, Key: n.NATSKey, ServerName: n.NATSTLSServerName},
	}
}
