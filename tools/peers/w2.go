package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
)

// w2Figures is w2's JSON line.
type w2Figures struct {
	Workload      string  `json:"workload"`
	Peer          string  `json:"peer"`
	Contenders    int     `json:"contenders"`
	DurationS     float64 `json:"duration_s"`
	Grants        int     `json:"grants"`
	Handoffs      int     `json:"handoffs"`
	HandoffsPerS  float64 `json:"handoffs_per_s"`
	HandoffP50    int64   `json:"handoff_p50_us"`
	HandoffP99    int64   `json:"handoff_p99_us"`
	Overlaps      int     `json:"overlaps"`
	GrantsMin     int     `json:"grants_min"`
	GrantsMax     int     `json:"grants_max"`
	Errors        int     `json:"errors"`
	NotHeld       int     `json:"not_held"`
	LongestWaitMS float64 `json:"longest_wait_ms"`
}

// grant is one grant, its times on the run's clock.
type grant struct {
	contender                         int
	acquireSent, granted, releaseSent time.Duration
	releaseDone                       time.Duration // -1: the release failed
}

// contenderLog is what one W2 contender saw.
type contenderLog struct {
	grants          []grant
	errors, notHeld int
	cutWait         time.Duration // -1: not cut at the deadline
}

// w2 runs N contenders, each with its own client, passing ONE lock around:
// acquire (waiting as the peer does by default), release at once, until
// the deadline; a wait still running then is cut. Under the bench it
// prints "free NS" (one uncontended acquire per contender, timed before
// the window), "grant ID ACQUIRE_SENT GRANTED RELEASE_SENT RELEASE_DONE"
// (ns on the run's clock; RELEASE_DONE -1: failed) and "contender ID
// ERRORS NOT_HELD CUT_WAIT" (-1: not cut), and the bench makes its W2
// figures from them.
func w2(args []string) error {
	flags := flag.NewFlagSet("w2", flag.ExitOnError)
	var t target
	t.addFlags(flags)
	contenders := flags.Int("contenders", 16, "contenders on the one resource")
	duration := flags.Duration("duration", 10*time.Second, "the measured window")
	_ = flags.Parse(args)
	if *contenders < 2 || *duration <= 0 {
		return errors.New("--contenders must be at least 2 and --duration above zero")
	}
	lockers := make([]locker, 0, *contenders)
	defer func() {
		for _, lk := range lockers {
			lk.close()
		}
	}()
	for range *contenders {
		lk, err := t.connect(true)
		if err != nil {
			return err
		}
		lockers = append(lockers, lk)
	}

	// Before the clock starts, as the bench's W2: use every client once,
	// then time one uncontended acquire per client, the baseline of a grant.
	warm := t.prefix + "/warm-up"
	var free []time.Duration
	for round := range 2 {
		for _, lk := range lockers {
			sent := time.Now()
			unlock, err := lk.acquire(context.Background(), warm)
			if err != nil {
				return fmt.Errorf("warm-up: %w", err)
			}
			if round == 1 {
				free = append(free, time.Since(sent))
			}
			if _, err := unlock(context.Background()); err != nil {
				return fmt.Errorf("warm-up: %w", err)
			}
		}
	}

	o := newOut(t.parent)
	if err := o.marker("measuring"); err != nil {
		return err
	}
	clock := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), clock.Add(*duration))
	defer cancel()
	logs := make([]contenderLog, *contenders)
	var wg sync.WaitGroup
	for id, lk := range lockers {
		wg.Go(func() { logs[id] = contend(ctx, id, lk, t.prefix+"/one", clock) })
	}
	wg.Wait()
	if err := o.done(); err != nil {
		return err
	}

	for _, d := range free {
		o.sample(fmt.Sprintf("free %d", d.Nanoseconds()))
	}
	var grants []grant
	figures := w2Figures{Workload: "W2", Peer: t.peer, Contenders: *contenders, DurationS: duration.Seconds()}
	figures.GrantsMin = len(logs[0].grants)
	for id, log := range logs {
		for _, g := range log.grants {
			o.sample(fmt.Sprintf("grant %d %d %d %d %d", id, g.acquireSent, g.granted, g.releaseSent, g.releaseDone))
		}
		o.sample(fmt.Sprintf("contender %d %d %d %d", id, log.errors, log.notHeld, log.cutWait))
		grants = append(grants, log.grants...)
		figures.Errors += log.errors
		figures.NotHeld += log.notHeld
		figures.GrantsMin = min(figures.GrantsMin, len(log.grants))
		figures.GrantsMax = max(figures.GrantsMax, len(log.grants))
	}
	slices.SortFunc(grants, func(a, b grant) int { return int(a.granted - b.granted) })
	var handoffs []time.Duration
	for i := 1; i < len(grants); i++ {
		previous, next := grants[i-1], grants[i]
		switch {
		case next.granted < previous.releaseSent:
			figures.Overlaps++
		case next.contender != previous.contender:
			handoffs = append(handoffs, next.granted-previous.releaseSent)
		}
	}
	for _, g := range grants {
		figures.LongestWaitMS = max(figures.LongestWaitMS, float64(g.granted-g.acquireSent)/1e6)
	}
	handoffs = sortedCopy(handoffs)
	figures.Grants = len(grants)
	figures.Handoffs = len(handoffs)
	figures.HandoffsPerS = float64(len(handoffs)) / duration.Seconds()
	figures.HandoffP50 = permilleUS(handoffs, 500)
	figures.HandoffP99 = permilleUS(handoffs, 990)
	return o.finish(figures)
}

// contend is one contender: acquire, release at once, until ctx ends.
// A failed acquire (redsync: its tries all found the lock taken) is
// counted and tried again 10 ms later.
func contend(ctx context.Context, id int, lk locker, resource string, clock time.Time) contenderLog {
	log := contenderLog{cutWait: -1}
	for ctx.Err() == nil {
		acquireSent := time.Since(clock)
		unlock, err := lk.acquire(ctx, resource)
		if err != nil {
			if ctx.Err() != nil {
				log.cutWait = time.Since(clock) - acquireSent
				break
			}
			log.errors++
			fmt.Fprintf(os.Stderr, "redlockd-peers w2: contender %d: acquire: %v\n", id, err)
			// Not a spin on a failing peer.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		g := grant{contender: id, acquireSent: acquireSent, granted: time.Since(clock)}
		g.releaseSent = time.Since(clock)
		// The release is not cut at the deadline: a held lock is passed on.
		release, cancel := context.WithTimeout(context.Background(), callTimeout)
		held, err := unlock(release)
		cancel()
		g.releaseDone = time.Since(clock)
		switch {
		case err != nil:
			log.errors++
			g.releaseDone = -1
			fmt.Fprintf(os.Stderr, "redlockd-peers w2: contender %d: release: %v\n", id, err)
		case !held:
			log.notHeld++
		}
		log.grants = append(log.grants, g)
	}
	return log
}
