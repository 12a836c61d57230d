package localcluster

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// writeServiceAccountKeys writes the key pair the apiserver signs and verifies service-account
// tokens with, returning the private and public key paths.
func writeServiceAccountKeys(dir string) (string, string, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", fmt.Errorf("generating service-account key: %w", err)
	}
	priv := filepath.Join(dir, "sa.key")
	pub := filepath.Join(dir, "sa.pub")
	privDER := x509.MarshalPKCS1PrivateKey(key)
	if err := os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: privDER}), 0o600); err != nil {
		return "", "", fmt.Errorf("writing service-account key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", fmt.Errorf("encoding service-account public key: %w", err)
	}
	if err := os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		return "", "", fmt.Errorf("writing service-account public key: %w", err)
	}
	return priv, pub, nil
}

// writeTokenFile writes a static token file with one admin user in system:masters.
func writeTokenFile(dir string) (path, token string, err error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("generating admin token: %w", err)
	}
	token = hex.EncodeToString(b)
	path = filepath.Join(dir, "tokens.csv")
	line := fmt.Sprintf("%s,admin,admin,system:masters\n", token)
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		return "", "", fmt.Errorf("writing token file: %w", err)
	}
	return path, token, nil
}

// freePorts asks the kernel for n free loopback ports; a variable so a test can hand out a port
// that is taken by the time it is used.
var freePorts = kernelFreePorts

func kernelFreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
