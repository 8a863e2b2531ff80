package redlockd_test

// Benchmarks (figures, not timed tests): one acquire+release cycle through
// this client beside the same cycle through the raw generated stub, on the
// shared daemon. C=1: one goroutine, ns/op is a cycle's mean latency.
// C=64: 64 goroutines (about: RunParallel starts a multiple of GOMAXPROCS),
// each cycle on its own resource; cycles/s is the throughput.
// Run: go test -run '^$' -bench . -benchtime 3s

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	redlockd "github.com/redlockd/redlockd/clients/go"
	pb "github.com/redlockd/redlockd/clients/go/redlockv1"
)

// concurrency is the number of goroutines of the parallel benchmarks.
const concurrency = 64

// cycle is one acquire+release of resource.
type cycle func(ctx context.Context, resource string) error

func clientCycle(c *redlockd.Client) cycle {
	return func(ctx context.Context, resource string) error {
		lock, err := c.Acquire(ctx, resource, 10*time.Second)
		if err != nil {
			return err
		}
		_, err = c.Release(ctx, lock)
		return err
	}
}

func stubCycle(stub pb.LockServiceClient) cycle {
	return func(ctx context.Context, resource string) error {
		resp, err := stub.Acquire(ctx, &pb.AcquireRequest{Resource: resource, Ttl: durationpb.New(10 * time.Second)})
		if err != nil {
			return err
		}
		_, err = stub.Release(ctx, &pb.ReleaseRequest{Resource: resource, Token: resp.GetLock().GetToken()})
		return err
	}
}

func benchCycles(b *testing.B, run cycle) {
	ctx := context.Background()
	b.Run("C=1", func(b *testing.B) {
		var took []time.Duration
		for i := 0; b.Loop(); i++ {
			start := time.Now()
			if err := run(ctx, fmt.Sprintf("bench/serial/%d", i%1024)); err != nil {
				b.Fatal(err)
			}
			took = append(took, time.Since(start))
		}
		slices.Sort(took)
		b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	})
	b.Run(fmt.Sprintf("C=%d", concurrency), func(b *testing.B) {
		// RunParallel starts SetParallelism * GOMAXPROCS goroutines.
		b.SetParallelism(max(1, concurrency/runtime.GOMAXPROCS(0)))
		var next atomic.Int64
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				// A resource per cycle: contention is not what is measured.
				if err := run(ctx, fmt.Sprintf("bench/parallel/%d", next.Add(1))); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "cycles/s")
	})
}

func BenchmarkClient(b *testing.B) {
	c, err := redlockd.Dial(shared.addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	benchCycles(b, clientCycle(c))
}

func BenchmarkStub(b *testing.B) {
	c, err := redlockd.Dial(shared.addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	benchCycles(b, stubCycle(c.Stub()))
}
