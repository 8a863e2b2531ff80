package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// lockTTL is the lease of every lock, W1's and W2's: the bench's 10 s.
const lockTTL = 10 * time.Second

// release ends a lock; held is false when the lock was no longer held
// (expired or taken), err only for a failed call.
type release func(ctx context.Context) (held bool, err error)

// A locker is one client's handle on a peer: W1's workers share one, as
// the goroutines of one process do; each W2 contender has its own, as
// separate processes would.
type locker interface {
	// acquire takes the lock on resource, retrying or waiting as the
	// locker was set up to.
	acquire(ctx context.Context, resource string) (release, error)
	close()
}

// target says which peer to run and where it is; the flags w1 and w2 share.
type target struct {
	peer   string
	nodes  string
	etcd   string
	prefix string
	parent bool
}

func (t *target) addFlags(flags *flag.FlagSet) {
	flags.StringVar(&t.peer, "peer", "", "redsync or etcd (required)")
	flags.StringVar(&t.nodes, "nodes", "", "redsync: the masters, comma-separated redis:// URLs")
	flags.StringVar(&t.etcd, "etcd", "", "etcd: the member's client address, HOST:PORT")
	flags.StringVar(&t.prefix, "prefix", "bench/peers", "resource names start with this")
	flags.BoolVar(&t.parent, "parent", false, "run under redlockd-bench: markers around the window, samples after stdin closes")
}

// connect opens one locker. waiting: W2's, which waits for a held lock
// as the peer does by default (redsync: 32 tries 50 to 250 ms apart;
// etcd: Lock blocks until the key before its own is deleted); otherwise
// W1's, one try (redsync) on resources nobody else holds.
func (t *target) connect(waiting bool) (locker, error) {
	switch t.peer {
	case "redsync":
		if t.nodes == "" {
			return nil, errors.New("redsync needs --nodes")
		}
		options := []redsync.Option{redsync.WithExpiry(lockTTL)}
		if !waiting {
			options = append(options, redsync.WithTries(1))
		}
		return newRedsync(strings.Split(t.nodes, ","), options)
	case "etcd":
		if t.etcd == "" {
			return nil, errors.New("etcd needs --etcd")
		}
		return newEtcd(t.etcd)
	default:
		return nil, fmt.Errorf("unknown --peer %q (redsync, etcd)", t.peer)
	}
}

// redsyncLocker: go-redsync over one go-redis client (a connection pool,
// at its default size) per master.
type redsyncLocker struct {
	clients []*redis.Client
	sync    *redsync.Redsync
	options []redsync.Option
}

func newRedsync(urls []string, options []redsync.Option) (*redsyncLocker, error) {
	l := &redsyncLocker{options: options}
	var pools []redsyncredis.Pool
	for _, u := range urls {
		opts, err := redis.ParseURL(u)
		if err != nil {
			l.close()
			return nil, fmt.Errorf("master %q: %w", u, err)
		}
		client := redis.NewClient(opts)
		l.clients = append(l.clients, client)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = client.Ping(ctx).Err()
		cancel()
		if err != nil {
			l.close()
			return nil, fmt.Errorf("master %q: %w", u, err)
		}
		pools = append(pools, goredis.NewPool(client))
	}
	l.sync = redsync.New(pools...)
	return l, nil
}

// acquire makes a new mutex per lock, as redsync's users do.
func (l *redsyncLocker) acquire(ctx context.Context, resource string) (release, error) {
	mutex := l.sync.NewMutex(resource, l.options...)
	if err := mutex.LockContext(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) (bool, error) {
		held, err := mutex.UnlockContext(ctx)
		var failed *redsync.RedisError
		if held || !errors.As(err, &failed) {
			return held, nil
		}
		return false, err
	}, nil
}

func (l *redsyncLocker) close() {
	for _, client := range l.clients {
		_ = client.Close()
	}
}

// etcdLocker: etcd's client and one session (a lease of the lock ttl,
// kept alive in the background) that every mutex of this locker is
// bound to, as a process that locks many resources uses one session.
type etcdLocker struct {
	client  *clientv3.Client
	session *concurrency.Session
}

func newEtcd(endpoint string) (*etcdLocker, error) {
	// Errors only: its retry interceptor warns of every call a W2
	// contender's deadline cuts, which is how W2 ends.
	logger, err := zap.NewProduction(zap.IncreaseLevel(zap.ErrorLevel))
	if err != nil {
		return nil, err
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      logger,
	})
	if err != nil {
		return nil, err
	}
	session, err := concurrency.NewSession(client, concurrency.WithTTL(int(lockTTL/time.Second)))
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	return &etcdLocker{client: client, session: session}, nil
}

// acquire makes a new mutex per lock on the locker's session.
func (l *etcdLocker) acquire(ctx context.Context, resource string) (release, error) {
	mutex := concurrency.NewMutex(l.session, resource)
	if err := mutex.Lock(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) (bool, error) {
		if err := mutex.Unlock(ctx); err != nil {
			return false, err
		}
		return true, nil
	}, nil
}

func (l *etcdLocker) close() {
	_ = l.session.Close()
	_ = l.client.Close()
}
