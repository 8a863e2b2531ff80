// Command bench is Go's row of scripts/bench-clients.sh: what the Go client
// costs beside the raw generated stub (Client.Stub(), same connection),
// against a running daemon. It prints one JSON line per way and asserts
// nothing. The method is clients/fourway/bench/bench.py's: a warm-up, then
// ROUNDS alternating runs of C=1 (p50 of a cycle) and of C=64 (64
// goroutines, each on its own resource; cycles/s), medians reported.
//
//	go run ./bench ADDRESS SECONDS ROUNDS
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	redlockd "github.com/redlockd/redlockd/clients/go"
	pb "github.com/redlockd/redlockd/clients/go/redlockv1"
)

type cycle func(ctx context.Context, resource string) error

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func c1(ctx context.Context, run cycle, resource string, seconds time.Duration) (float64, error) {
	var took []float64
	end := time.Now().Add(seconds)
	for time.Now().Before(end) {
		start := time.Now()
		if err := run(ctx, resource); err != nil {
			return 0, err
		}
		took = append(took, float64(time.Since(start).Nanoseconds())/1e6)
	}
	return median(took), nil
}

func c64(ctx context.Context, run cycle, prefix string, seconds time.Duration) (rate float64, failed int64) {
	var done, fails atomic.Int64
	start := time.Now()
	end := start.Add(seconds)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			resource := fmt.Sprintf("%s/%d", prefix, i)
			for time.Now().Before(end) {
				if run(ctx, resource) != nil {
					fails.Add(1) // counted, not hidden
				} else {
					done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return float64(done.Load()) / time.Since(start).Seconds(), fails.Load()
}

func main() {
	if err := mainErr(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "go bench:", err)
		os.Exit(1)
	}
}

func mainErr(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("usage: bench ADDRESS SECONDS ROUNDS")
	}
	secs, err := strconv.ParseFloat(args[1], 64)
	if err != nil {
		return err
	}
	rounds, err := strconv.Atoi(args[2])
	if err != nil {
		return err
	}
	seconds := time.Duration(secs * float64(time.Second))
	client, err := redlockd.Dial(args[0])
	if err != nil {
		return err
	}
	defer client.Close()
	stub := client.Stub()
	ways := []struct {
		name string
		run  cycle
	}{
		{"raw", func(ctx context.Context, resource string) error {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			resp, err := stub.Acquire(ctx, &pb.AcquireRequest{Resource: resource, Ttl: durationpb.New(10 * time.Second)})
			if err != nil {
				return err
			}
			_, err = stub.Release(ctx, &pb.ReleaseRequest{Resource: resource, Token: resp.GetLock().GetToken()})
			return err
		}},
		{"client", func(ctx context.Context, resource string) error {
			lock, err := client.Acquire(ctx, resource, 10*time.Second)
			if err != nil {
				return err
			}
			_, err = client.Release(ctx, lock)
			return err
		}},
	}
	ctx := context.Background()
	for _, way := range ways {
		for range 50 {
			if err := way.run(ctx, "bench/go/warm/"+way.name); err != nil {
				return err
			}
		}
	}
	p50 := map[string][]float64{}
	rate := map[string][]float64{}
	failed := map[string]int64{}
	for range rounds {
		for _, way := range ways {
			p, err := c1(ctx, way.run, "bench/go/c1/"+way.name, seconds)
			if err != nil {
				return err
			}
			p50[way.name] = append(p50[way.name], p)
		}
	}
	for range rounds {
		for _, way := range ways {
			r, f := c64(ctx, way.run, "bench/go/c64/"+way.name, seconds)
			rate[way.name] = append(rate[way.name], r)
			failed[way.name] += f
		}
	}
	for _, way := range ways {
		line, err := json.Marshal(map[string]any{
			"lang": "go", "way": way.name, "c1_p50_ms": median(p50[way.name]),
			"c64_cycles_per_s": median(rate[way.name]), "c64_failed": failed[way.name],
		})
		if err != nil {
			return err
		}
		fmt.Println(string(line))
	}
	return nil
}
