// Command contender is the Go contender of the four-runtime test
// (clients/fourway/harness.py).
//
//	go run . ADDRESS LOG ROUNDS
//
// It holds "fourway/shared" ROUNDS times through Client.Hold (the module in
// clients/go, by a replace directive). In each critical section it appends
// "go <fence> start <ns>" to LOG, sleeps a few random milliseconds, checks
// Lease.Done and appends "go <fence> end <ns>" (or "lost"); after
// Release it appends "unheld" if the daemon said the lock was no longer
// held. Each line is one O_APPEND write. Times are CLOCK_MONOTONIC
// nanoseconds (clock_gettime), the clock the other three contenders read
// too. A retryable failure (ErrUnavailable: masters slower than
// node_timeout on a starved machine) of Hold is retried, up to attempts
// times; a Release that fails is reported on stderr and left to the ttl
// (the section itself was done under the lock). Exits 1 if the lock was
// ever lost.
package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	redlockd "github.com/redlockd/redlockd/clients/go"
)

const (
	runtimeName = "go"
	resource    = "fourway/shared"
	// attempts is the number of tries per section on retryable failures.
	attempts = 20
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "go contender:", err)
		os.Exit(1)
	}
}

func monotonicNs() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

func run(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("usage: contender ADDRESS LOG ROUNDS")
	}
	rounds, err := strconv.Atoi(args[2])
	if err != nil {
		return err
	}
	log, err := os.OpenFile(args[1], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	line := func(fence uint64, what string) error {
		_, err := fmt.Fprintf(log, "%s %d %s %d\n", runtimeName, fence, what, monotonicNs())
		return err
	}
	if err := line(0, "clock"); err != nil {
		return err
	}
	client, err := redlockd.Dial(args[0])
	if err != nil {
		return err
	}
	defer client.Close()
	ctx := context.Background()
	lost := false
	for range rounds {
		var lease *redlockd.Lease
		for attempt := 1; ; attempt++ {
			lease, err = client.Hold(ctx, resource, 5*time.Second, redlockd.WithWait(60*time.Second))
			if err == nil || !errors.Is(err, redlockd.ErrUnavailable) || attempt == attempts {
				break
			}
		}
		if err != nil {
			return err
		}
		fence := lease.Fence()
		if err := line(fence, "start"); err != nil {
			return err
		}
		time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond)
		what := "end"
		select {
		case <-lease.Done():
			what, lost = "lost", true
		default:
		}
		if err := line(fence, what); err != nil {
			return err
		}
		wasHeld, err := lease.Release(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "go contender: release:", err)
		} else if !wasHeld {
			lost = true
			if err := line(fence, "unheld"); err != nil {
				return err
			}
		}
		// Outside the lock: a pause that lets the other runtimes in.
		time.Sleep(time.Duration(10+rand.IntN(20)) * time.Millisecond)
	}
	if lost {
		return fmt.Errorf("the lock was lost")
	}
	return nil
}
