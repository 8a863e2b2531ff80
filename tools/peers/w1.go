package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"
)

// callTimeout bounds each W1 call, so that a stuck peer fails a cycle
// instead of hanging the run.
const callTimeout = 5 * time.Second

// w1Figures is w1's JSON line.
type w1Figures struct {
	Workload     string  `json:"workload"`
	Peer         string  `json:"peer"`
	Concurrency  int     `json:"concurrency"`
	DurationS    float64 `json:"duration_s"`
	Cycles       int     `json:"cycles"`
	CyclesPerS   float64 `json:"cycles_per_s"`
	AcquireP50   int64   `json:"acquire_p50_us"`
	AcquireP99   int64   `json:"acquire_p99_us"`
	AcquireP999  int64   `json:"acquire_p999_us"`
	ReleaseP50   int64   `json:"release_p50_us"`
	ReleaseP99   int64   `json:"release_p99_us"`
	Errors       int     `json:"errors"`
	WarmupErrors int     `json:"warmup_errors"`
}

// workerLog is what one W1 worker saw in the window.
type workerLog struct {
	acquire, release []time.Duration
	errors           int
}

// w1 runs C workers, each acquiring and releasing a resource of its own
// in a loop, after one warm-up cycle each (as the bench's own modes do).
// Under the bench each completed cycle is printed as
// "cycle ACQUIRE_NS RELEASE_NS", and "window NS ERRORS" after them.
func w1(args []string) error {
	flags := flag.NewFlagSet("w1", flag.ExitOnError)
	var t target
	t.addFlags(flags)
	concurrency := flags.Int("concurrency", 1, "workers")
	duration := flags.Duration("duration", 10*time.Second, "the measured window")
	_ = flags.Parse(args)
	if *concurrency < 1 || *duration <= 0 {
		return errors.New("--concurrency and --duration must be above zero")
	}
	lk, err := t.connect(false)
	if err != nil {
		return err
	}
	defer lk.close()
	resources := make([]string, *concurrency)
	for i := range resources {
		resources[i] = fmt.Sprintf("%s/%d", t.prefix, i)
	}

	// A failed warm-up cycle is not fatal: the window counts its own errors.
	warmupErrors := 0
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, resource := range resources {
		wg.Go(func() {
			if _, _, err := cycle(lk, resource); err != nil {
				mu.Lock()
				warmupErrors++
				mu.Unlock()
				fmt.Fprintf(os.Stderr, "redlockd-peers w1: warm-up cycle: %v\n", err)
			}
		})
	}
	wg.Wait()

	o := newOut(t.parent)
	if err := o.marker("measuring"); err != nil {
		return err
	}
	start := time.Now()
	deadline := start.Add(*duration)
	logs := make([]workerLog, *concurrency)
	for i, resource := range resources {
		wg.Go(func() {
			log := &logs[i]
			for time.Now().Before(deadline) {
				acquire, release, err := cycle(lk, resource)
				if err != nil {
					log.errors++
					// A lock left by a failed cycle expires with its ttl;
					// do not spin on it meanwhile.
					time.Sleep(10 * time.Millisecond)
					continue
				}
				log.acquire = append(log.acquire, acquire)
				log.release = append(log.release, release)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := o.done(); err != nil {
		return err
	}

	var acquire, release []time.Duration
	errs := 0
	for _, log := range logs {
		for j := range log.acquire {
			o.sample(fmt.Sprintf("cycle %d %d", log.acquire[j].Nanoseconds(), log.release[j].Nanoseconds()))
		}
		acquire = append(acquire, log.acquire...)
		release = append(release, log.release...)
		errs += log.errors
	}
	o.sample(fmt.Sprintf("window %d %d", elapsed.Nanoseconds(), errs))
	acquire, release = sortedCopy(acquire), sortedCopy(release)
	return o.finish(w1Figures{
		Workload:     "W1",
		Peer:         t.peer,
		Concurrency:  *concurrency,
		DurationS:    elapsed.Seconds(),
		Cycles:       len(acquire),
		CyclesPerS:   float64(len(acquire)) / elapsed.Seconds(),
		AcquireP50:   permilleUS(acquire, 500),
		AcquireP99:   permilleUS(acquire, 990),
		AcquireP999:  permilleUS(acquire, 999),
		ReleaseP50:   permilleUS(release, 500),
		ReleaseP99:   permilleUS(release, 990),
		Errors:       errs,
		WarmupErrors: warmupErrors,
	})
}

// cycle is one acquire + release of resource: their latencies. A release
// that finds the lock no longer held fails the cycle.
func cycle(lk locker, resource string) (time.Duration, time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	unlock, err := lk.acquire(ctx, resource)
	cancel()
	if err != nil {
		return 0, 0, err
	}
	acquired := time.Since(start)
	ctx, cancel = context.WithTimeout(context.Background(), callTimeout)
	held, err := unlock(ctx)
	cancel()
	switch {
	case err != nil:
		return 0, 0, err
	case !held:
		return 0, 0, errors.New("released a lock no longer held")
	}
	return acquired, time.Since(start) - acquired, nil
}
