package redlockd_test

// Bearer tokens and TLS against a real daemon: the token goes as
// `authorization: Bearer ...` on every call and session (per-RPC
// credentials); TLS with a private CA made here with crypto/x509; mutual
// TLS with a client certificate signed by that CA.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	redlockd "github.com/redlockd/redlockd/clients/go"
)

const ordersToken = "orders-7f3a9c2e4b6d8f0a1c3e5b7d9f2a4c6e"

// roundTrip acquires and releases resource, then holds and releases it:
// proof that calls and sessions get through.
func roundTrip(t *testing.T, c *redlockd.Client, resource string) {
	t.Helper()
	ctx := context.Background()
	lock, err := c.Acquire(ctx, resource, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if held, err := c.Release(ctx, lock); err != nil || !held {
		t.Fatalf("release: %v %v", held, err)
	}
	lease, err := c.Hold(ctx, resource, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if lease.Fence() <= lock.Fence {
		t.Fatalf("fence %d after %d", lease.Fence(), lock.Fence)
	}
	if held, err := lease.Release(ctx); err != nil || !held {
		t.Fatalf("lease release: %v %v", held, err)
	}
}

func TestBearerToken(t *testing.T) {
	sum := sha256.Sum256([]byte(ordersToken))
	d := newDaemon(t, daemonSpec{toml: fmt.Sprintf(
		"[[auth.clients]]\nname = \"orders\"\ntoken_sha256 = \"%s\"\nnamespaces = [\"orders/\"]\n", hex.EncodeToString(sum[:]))})
	ctx := context.Background()

	t.Run("with the token, calls and sessions in its namespaces go through", func(t *testing.T) {
		roundTrip(t, dial(t, d.addr, redlockd.WithToken(ordersToken)), "orders/42")
	})
	t.Run("outside its namespaces: permission denied", func(t *testing.T) {
		c := dial(t, d.addr, redlockd.WithToken(ordersToken))
		_, err := c.Acquire(ctx, "jobs/1", time.Second)
		wantKind(t, err, redlockd.ErrPermissionDenied, codes.PermissionDenied)
		_, err = c.Hold(ctx, "jobs/1", time.Second)
		wantKind(t, err, redlockd.ErrPermissionDenied, codes.PermissionDenied)
	})
	t.Run("no token or a wrong one: unauthenticated, and the token is never in the error", func(t *testing.T) {
		for _, opts := range [][]redlockd.DialOption{nil, {redlockd.WithToken("orders-wrong")}} {
			c := dial(t, d.addr, opts...)
			_, err := c.Acquire(ctx, "orders/1", time.Second)
			wantKind(t, err, redlockd.ErrUnauthenticated, codes.Unauthenticated)
			if strings.Contains(err.Error(), ordersToken) {
				t.Fatal("the error shows the token")
			}
			_, err = c.Hold(ctx, "orders/1", time.Second)
			wantKind(t, err, redlockd.ErrUnauthenticated, codes.Unauthenticated)
		}
	})
}

// pki is a private CA with a server certificate for 127.0.0.1 and a client certificate.
type pki struct {
	dir                   string
	caPEM                 []byte
	clientCert, clientKey []byte
}

func (p *pki) file(name string) string { return filepath.Join(p.dir, name) }

// makePKI writes ca.crt, server.crt/key and client.crt/key into a temporary directory.
func makePKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, kind string, der []byte) []byte {
		data := pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
		if err := os.WriteFile(p.file(name), data, 0o600); err != nil {
			t.Fatal(err)
		}
		return data
	}
	now := time.Now()
	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redlockd test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	p.caPEM = write("ca.crt", "CERTIFICATE", caDER)
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(name string, serial int64, tmpl *x509.Certificate) (certPEM, keyPEM []byte) {
		key := newKey()
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.Subject = pkix.Name{CommonName: name}
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(48*time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".crt", "CERTIFICATE", der), write(name+".key", "PRIVATE KEY", keyDER)
	}
	issue("server", 2, &x509.Certificate{
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	p.clientCert, p.clientKey = issue("client", 3, &x509.Certificate{
		DNSNames: []string{"orders.client.test"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	return p
}

// probe is the launcher's options for its readiness probe: trust the CA
// (and, for mutual TLS, show the client certificate).
func (p *pki) probe(withClientCert bool) []string {
	options := []string{"--probe-ca", p.file("ca.crt")}
	if withClientCert {
		options = append(options, "--probe-cert", p.file("client.crt"), "--probe-key", p.file("client.key"))
	}
	return options
}

func TestTLSWithAPrivateCA(t *testing.T) {
	p := makePKI(t)
	d := newDaemon(t, daemonSpec{
		settings: map[string]string{"server.tls.cert": p.file("server.crt"), "server.tls.key": p.file("server.key")},
		probe:    p.probe(false),
	})
	t.Run("a client trusting the CA gets through, with or without https://", func(t *testing.T) {
		for _, target := range []string{d.addr, "https://" + d.addr} {
			roundTrip(t, dial(t, target, redlockd.WithCACert(p.caPEM)), "tls/ok")
		}
	})
	t.Run("plaintext, or TLS without the CA, does not get through", func(t *testing.T) {
		for _, target := range []string{d.addr, "https://" + d.addr} {
			c := dial(t, target, redlockd.WithCallTimeout(5*time.Second))
			_, err := c.Acquire(context.Background(), "tls/refused", time.Second)
			wantKind(t, err, redlockd.ErrUnavailable, codes.Unavailable)
		}
	})
	t.Run("a CA that is not PEM is refused before connecting", func(t *testing.T) {
		_, err := redlockd.Dial(d.addr, redlockd.WithCACert([]byte("not pem")))
		if e := wantKind(t, err, redlockd.ErrInvalidArgument, codes.InvalidArgument); e.Field != "caCert" {
			t.Fatalf("field %q", e.Field)
		}
	})
}

func TestMutualTLS(t *testing.T) {
	p := makePKI(t)
	d := newDaemon(t, daemonSpec{
		settings: map[string]string{
			"server.tls.cert": p.file("server.crt"), "server.tls.key": p.file("server.key"),
			"server.tls.client_ca": p.file("ca.crt"),
		},
		probe: p.probe(true),
	})
	t.Run("with a client certificate signed by the CA, calls and sessions go through", func(t *testing.T) {
		roundTrip(t, dial(t, d.addr, redlockd.WithCACert(p.caPEM), redlockd.WithClientCert(p.clientCert, p.clientKey)), "mtls/ok")
	})
	t.Run("without a client certificate the call fails", func(t *testing.T) {
		c := dial(t, d.addr, redlockd.WithCACert(p.caPEM), redlockd.WithCallTimeout(5*time.Second))
		_, err := c.Acquire(context.Background(), "mtls/refused", time.Second)
		if code := status.Code(err); code != codes.Unavailable && code != codes.Unauthenticated {
			t.Fatalf("want UNAVAILABLE or UNAUTHENTICATED, got %v", err)
		}
	})
	t.Run("a key without its certificate is refused before connecting", func(t *testing.T) {
		_, err := redlockd.Dial(d.addr, redlockd.WithCACert(p.caPEM), redlockd.WithClientCert(nil, p.clientKey))
		if e := wantKind(t, err, redlockd.ErrInvalidArgument, codes.InvalidArgument); e.Field != "clientCert" {
			t.Fatalf("field %q", e.Field)
		}
	})
}
