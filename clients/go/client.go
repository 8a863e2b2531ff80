package redlockd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/redlockd/redlockd/clients/go/redlockv1"
)

// Client is a connection to one redlockd daemon (any replica of a
// deployment). It is safe for concurrent use; Close it when done.
type Client struct {
	conn        *grpc.ClientConn
	stub        pb.LockServiceClient
	election    pb.ElectionServiceClient
	callTimeout time.Duration
	// releases are the background releases of unanswered Acquires.
	releases releases
}

// Dial connects (lazily, as grpc.NewClient does) to the daemon at target:
// "host:port", "http://host:port", or "https://host:port" (TLS with the
// system's roots unless WithCACert or WithTLS say otherwise).
func Dial(target string, opts ...DialOption) (*Client, error) {
	cfg := dialConfig{callTimeout: DefaultCallTimeout}
	for _, opt := range opts {
		opt(&cfg)
	}
	switch {
	case strings.HasPrefix(target, "https://"):
		target, cfg.useTLS = strings.TrimPrefix(target, "https://"), true
	case strings.HasPrefix(target, "http://"):
		target = strings.TrimPrefix(target, "http://")
	}
	target = strings.TrimSuffix(target, "/")
	if target == "" {
		return nil, invalidArgument("Dial", "target", "must not be empty")
	}
	if cfg.callTimeout <= 0 {
		return nil, invalidArgument("Dial", "callTimeout", "must be positive")
	}
	transport, err := transportCredentials(&cfg)
	if err != nil {
		return nil, err
	}
	grpcOpts := []grpc.DialOption{grpc.WithTransportCredentials(transport)}
	if cfg.token != "" {
		grpcOpts = append(grpcOpts, grpc.WithPerRPCCredentials(bearer{token: cfg.token}))
	}
	grpcOpts = append(grpcOpts, cfg.grpcOptions...)
	conn, err := grpc.NewClient(target, grpcOpts...)
	if err != nil {
		return nil, fromRPC("Dial", err)
	}
	return &Client{
		conn:        conn,
		stub:        pb.NewLockServiceClient(conn),
		election:    pb.NewElectionServiceClient(conn),
		callTimeout: cfg.callTimeout,
	}, nil
}

// transportCredentials builds plaintext or TLS credentials from the options.
func transportCredentials(cfg *dialConfig) (credentials.TransportCredentials, error) {
	if !cfg.useTLS {
		return insecure.NewCredentials(), nil
	}
	tlsConfig := cfg.tls
	if tlsConfig == nil {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if cfg.caPEM != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.caPEM) {
			return nil, invalidArgument("Dial", "caCert", "no PEM certificate found")
		}
		tlsConfig.RootCAs = pool
	}
	if cfg.certPEM != nil || cfg.keyPEM != nil {
		cert, err := tls.X509KeyPair(cfg.certPEM, cfg.keyPEM)
		if err != nil {
			return nil, invalidArgument("Dial", "clientCert", "not a PEM certificate chain and its key: "+err.Error())
		}
		tlsConfig.Certificates = append(tlsConfig.Certificates, cert)
	}
	return credentials.NewTLS(tlsConfig), nil
}

// bearer sends the token as `authorization: Bearer <token>` on every RPC.
type bearer struct{ token string }

// GetRequestMetadata is grpc's per-RPC credentials hook.
func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity is false so that a loopback daemon without TLS
// can be used (see WithToken).
func (bearer) RequireTransportSecurity() bool { return false }

// Close closes the connection. Open Hold and Campaign sessions end with it:
// the daemon releases their locks and leaderships, and their Leases' and
// Leaderships' Done channels close. It first
// lets the background releases of unanswered Acquires finish (each takes a
// second at most).
func (c *Client) Close() error {
	c.releases.close()
	return c.conn.Close()
}

// Stub is the generated gRPC client on the same connection, for what this
// package does not wrap.
func (c *Client) Stub() pb.LockServiceClient { return c.stub }

// ElectionStub is the generated ElectionService client on the same
// connection.
func (c *Client) ElectionStub() pb.ElectionServiceClient { return c.election }

// withDefaultDeadline bounds ctx by wait + the call timeout when it has no deadline.
func (c *Client) withDefaultDeadline(ctx context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, wait+c.callTimeout)
}

// acquireRequest checks and converts Acquire's and Hold's arguments.
func acquireRequest(op, resource string, ttl time.Duration, opts []AcquireOption) (*pb.AcquireRequest, acquireConfig, error) {
	var cfg acquireConfig
	for _, opt := range opts {
		opt(&cfg)
	}
	if resource == "" {
		return nil, cfg, invalidArgument(op, "resource", "must not be empty")
	}
	if ttl <= 0 {
		return nil, cfg, invalidArgument(op, "ttl", "must be positive, got "+ttl.String())
	}
	if cfg.wait < 0 {
		return nil, cfg, invalidArgument(op, "wait", "must not be negative, got "+cfg.wait.String())
	}
	if cfg.requestID == "" {
		cfg.requestID = NewRequestID()
	}
	return &pb.AcquireRequest{
		Resource:  resource,
		Ttl:       durationpb.New(ttl),
		Wait:      durationpb.New(cfg.wait),
		Owner:     cfg.owner,
		RequestId: cfg.requestID,
	}, cfg, nil
}

// checkIdentity refuses a lock without resource or token before sending.
func checkIdentity(op string, lock Lock) error {
	if lock.Resource == "" {
		return invalidArgument(op, "resource", "must not be empty")
	}
	if lock.Token == "" {
		return invalidArgument(op, "token", "must not be empty")
	}
	return nil
}

// Acquire takes the lock on resource for ttl; with WithWait it keeps
// trying while someone else holds it. ErrHeld when it stayed held for the
// whole wait. The Lock's validity counts from when the request was sent.
// A context without a deadline gets wait + the call timeout.
//
// After a deadline or cancellation, nothing is left locked: when the call
// ends without the daemon's answer (the context's deadline or cancellation
// fired first, or the connection broke), the client releases in the
// background, within a second, whatever its request id may have got (the
// lock's token is derived from the request id). When the daemon answered,
// DEADLINE_EXCEEDED included, it has released any late grant itself.
func (c *Client) Acquire(ctx context.Context, resource string, ttl time.Duration, opts ...AcquireOption) (Lock, error) {
	req, cfg, err := acquireRequest("Acquire", resource, ttl, opts)
	if err != nil {
		return Lock{}, err
	}
	ctx, cancel := c.withDefaultDeadline(ctx, cfg.wait)
	defer cancel()
	token := derivedToken(resource, req.GetRequestId())
	// A retry with the same request id waits for the release of the
	// unanswered call before it, which would otherwise release the retry's
	// lock (same request id, same token).
	if err := c.releases.wait(ctx, token); err != nil {
		return Lock{}, fromRPC("Acquire", status.FromContextError(err).Err())
	}
	sent := time.Now()
	var trailer metadata.MD
	resp, err := c.stub.Acquire(ctx, req, grpc.Trailer(&trailer))
	if err != nil {
		if !answeredByDaemon(ctx, err, trailer) {
			c.releases.start(c.stub, resource, token)
		}
		return Lock{}, fromRPC("Acquire", err)
	}
	return lockFromWire(resp.GetLock(), sent), nil
}

// Extend resets the lock's time to live to ttl if its token still holds
// it: a new Lock (same token and fence). ErrNotHeld if it does not.
func (c *Client) Extend(ctx context.Context, lock Lock, ttl time.Duration) (Lock, error) {
	if err := checkIdentity("Extend", lock); err != nil {
		return Lock{}, err
	}
	if ttl <= 0 {
		return Lock{}, invalidArgument("Extend", "ttl", "must be positive, got "+ttl.String())
	}
	ctx, cancel := c.withDefaultDeadline(ctx, 0)
	defer cancel()
	sent := time.Now()
	resp, err := c.stub.Extend(ctx, &pb.ExtendRequest{Resource: lock.Resource, Token: lock.Token, Ttl: durationpb.New(ttl)})
	if err != nil {
		return Lock{}, fromRPC("Extend", err)
	}
	return lockFromWire(resp.GetLock(), sent), nil
}

// Release gives the lock up. wasHeld false means it had expired or been
// taken over first: the work done under it may have overlapped another
// holder's. Releasing twice is not an error (the second says false).
func (c *Client) Release(ctx context.Context, lock Lock) (wasHeld bool, err error) {
	if err := checkIdentity("Release", lock); err != nil {
		return false, err
	}
	ctx, cancel := c.withDefaultDeadline(ctx, 0)
	defer cancel()
	resp, err := c.stub.Release(ctx, &pb.ReleaseRequest{Resource: lock.Resource, Token: lock.Token})
	if err != nil {
		return false, fromRPC("Release", err)
	}
	return resp.GetWasHeld(), nil
}

// Validate asks whether lock (its resource and token) is still the current
// holder on a majority, and for how long at least, as a resource server
// checks a client's claim.
func (c *Client) Validate(ctx context.Context, lock Lock) (Validation, error) {
	if err := checkIdentity("Validate", lock); err != nil {
		return Validation{}, err
	}
	ctx, cancel := c.withDefaultDeadline(ctx, 0)
	defer cancel()
	sent := time.Now()
	resp, err := c.stub.Validate(ctx, &pb.ValidateRequest{Resource: lock.Resource, Token: lock.Token})
	if err != nil {
		return Validation{}, fromRPC("Validate", err)
	}
	if !resp.GetHeld() {
		return Validation{}, nil
	}
	validity := resp.GetValidity().AsDuration()
	return Validation{Held: true, Validity: validity, ValidUntil: sent.Add(validity)}, nil
}
