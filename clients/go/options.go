package redlockd

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"time"

	"google.golang.org/grpc"
)

// DefaultCallTimeout bounds a call whose context has no deadline, beyond
// the wait it asks for (as the Python and Node clients do).
const DefaultCallTimeout = 10 * time.Second

// dialConfig collects what the DialOptions ask for.
type dialConfig struct {
	tls         *tls.Config
	caPEM       []byte
	certPEM     []byte
	keyPEM      []byte
	useTLS      bool
	token       string
	callTimeout time.Duration
	grpcOptions []grpc.DialOption
}

// DialOption configures Dial.
type DialOption func(*dialConfig)

// WithTLS turns TLS on with this configuration (server name, roots, client
// certificates as you set them). A target starting with https:// also
// turns TLS on, with the system's roots.
func WithTLS(config *tls.Config) DialOption {
	return func(c *dialConfig) { c.tls = config.Clone(); c.useTLS = true }
}

// WithCACert turns TLS on and trusts the PEM certificates given (a private
// CA) instead of the system's roots.
func WithCACert(pem []byte) DialOption {
	return func(c *dialConfig) { c.caPEM = pem; c.useTLS = true }
}

// WithClientCert turns TLS on and presents this certificate chain and key
// (PEM) to a daemon that asks for one (mutual TLS, server.tls.client_ca).
func WithClientCert(certPEM, keyPEM []byte) DialOption {
	return func(c *dialConfig) { c.certPEM, c.keyPEM = certPEM, keyPEM; c.useTLS = true }
}

// WithToken sends `authorization: Bearer <token>` with every call and
// session (per-RPC credentials), for a daemon with [[auth.clients]].
// Without TLS the token crosses the network in clear: use it only over
// TLS or on loopback.
func WithToken(token string) DialOption {
	return func(c *dialConfig) { c.token = token }
}

// WithCallTimeout sets how long a call whose context has no deadline may
// take beyond the wait it asks for (DefaultCallTimeout if unset). It also
// bounds Lease.Release.
func WithCallTimeout(d time.Duration) DialOption {
	return func(c *dialConfig) { c.callTimeout = d }
}

// WithGRPCOptions passes options to grpc.NewClient as they are (keepalive,
// interceptors, a custom dialer).
func WithGRPCOptions(opts ...grpc.DialOption) DialOption {
	return func(c *dialConfig) { c.grpcOptions = append(c.grpcOptions, opts...) }
}

// acquireConfig collects what the AcquireOptions ask for.
type acquireConfig struct {
	wait      time.Duration
	owner     string
	requestID string
}

// AcquireOption configures Acquire and Hold.
type AcquireOption func(*acquireConfig)

// WithWait keeps trying for up to d while someone else holds the resource,
// woken as soon as the holder releases. Zero (the default) tries once. A
// context deadline shorter than d ends the call first, with
// ErrDeadlineExceeded, and nothing left locked.
func WithWait(d time.Duration) AcquireOption {
	return func(c *acquireConfig) { c.wait = d }
}

// WithOwner names the caller in the daemon's logs and metrics (low
// cardinality; never part of the lock's identity).
func WithOwner(owner string) AcquireOption {
	return func(c *acquireConfig) { c.owner = owner }
}

// WithRequestID makes the call idempotent under the caller's own key: 22 to
// 64 characters of A-Z a-z 0-9 - _ holding at least 128 random bits (see
// NewRequestID). Retried with the same id, Acquire returns the lock that id
// already holds instead of ErrHeld. After a deadline or cancellation,
// nothing is left locked: when a call ends without the daemon's answer (its
// context's deadline or cancellation, a broken connection), the client
// releases what its request id may have got, in the background; a retry
// with the same id through the same Client waits for that release, then
// acquires anew. Without it, each call draws a fresh one. Keep it secret,
// like a token.
func WithRequestID(id string) AcquireOption {
	return func(c *acquireConfig) { c.requestID = id }
}

// NewRequestID draws a request id: 128 random bits, URL-safe base64.
func NewRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails since Go 1.24 (it would crash instead)
	return base64.RawURLEncoding.EncodeToString(b[:])
}
