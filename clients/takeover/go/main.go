// Command candidate is the Go candidate of the take-over run
// (clients/takeover/harness.py).
//
//	candidate ADDRESS LOG TTL_MS
//
// It campaigns for the election "takeover" with the value "go-<pid>"
// through Client.Campaign (the module in clients/go, by a replace
// directive); elected, it acts every actEvery while the Leadership's Done
// channel is open, then, once it is closed, records the loss and campaigns
// again, until killed. Every event is one JSON line, one O_APPEND write to
// LOG, as the Python candidate writes them (clients/takeover/python/candidate.py):
// campaign, elected (term, t, wall), act (term, t, rem_ms), lost (term, t,
// reason), error. Times are CLOCK_MONOTONIC nanoseconds (clock_gettime),
// the clock the other candidates and the harness read too; an act's t is
// read before the check of Done that lets it happen.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	redlockd "github.com/redlockd/redlockd/clients/go"
)

const (
	lang     = "go"
	election = "takeover"
	// actEvery is the time between two acts of a leader.
	actEvery = 50 * time.Millisecond
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "go candidate:", err)
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
		return fmt.Errorf("usage: candidate ADDRESS LOG TTL_MS")
	}
	ttlMs, err := strconv.Atoi(args[2])
	if err != nil {
		return err
	}
	log, err := os.OpenFile(args[1], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	pid := os.Getpid()
	write := func(event map[string]any) error {
		event["lang"], event["pid"] = lang, pid
		if _, ok := event["t"]; !ok {
			event["t"] = monotonicNs()
		}
		line, err := json.Marshal(event)
		if err != nil {
			return err
		}
		_, err = log.Write(append(line, '\n'))
		return err
	}
	client, err := redlockd.Dial(args[0])
	if err != nil {
		return err
	}
	defer client.Close()
	ctx := context.Background()
	ttl := time.Duration(ttlMs) * time.Millisecond
	for {
		if err := write(map[string]any{"ev": "campaign"}); err != nil {
			return err
		}
		lead, err := client.Campaign(ctx, election, fmt.Sprintf("%s-%d", lang, pid), redlockd.WithLeadershipTTL(ttl))
		if err != nil {
			if err := write(map[string]any{"ev": "error", "error": err.Error()}); err != nil {
				return err
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		term := lead.Term()
		if err := write(map[string]any{"ev": "elected", "term": term, "wall": float64(time.Now().UnixNano()) / 1e9}); err != nil {
			return err
		}
		for {
			t := monotonicNs()
			// Err, not Done: Err reads the clock, so a leader resumed
			// after a pause past its validity stands down before acting.
			if lost := lead.Err(); lost != nil {
				if err := write(map[string]any{"ev": "lost", "term": term, "reason": lost.Error()}); err != nil {
					return err
				}
				break
			}
			if err := write(map[string]any{"ev": "act", "term": term, "t": t, "rem_ms": lead.Remaining().Milliseconds()}); err != nil {
				return err
			}
			time.Sleep(actEvery)
		}
	}
}
