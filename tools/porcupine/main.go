// Command porcupine checks a chaos history (tools/chaos/HISTORY.md) for
// linearizability against a fenced lock service with leases, using
// Porcupine: no two conflicting holders at once, at most L permits of a
// limit-L semaphore, and fences increasing in grant order.
//
//	go -C tools/porcupine run . --history FILE [--timeout 60s] [--visualize out.html]
//
// Exit status: 0 accepted, 1 not linearizable (the resources and grants are
// printed), 2 malformed input or a check that did not finish in --timeout.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/anishathalye/porcupine"
)

const (
	exitAccepted  = 0
	exitRejected  = 1
	exitUndecided = 2
)

// explainedAtMost bounds how many rejected resources are explained.
const explainedAtMost = 5

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("porcupine", flag.ContinueOnError)
	flags.SetOutput(stderr)
	historyPath := flags.String("history", "", "the chaos history file (JSON lines, tools/chaos/HISTORY.md)")
	timeout := flags.Duration("timeout", 60*time.Second, "bound on the check; a resource undecided by then fails the run (exit 2). Explaining rejected resources and the visualization get as long again")
	visualizePath := flags.String("visualize", "", "write Porcupine's HTML visualization here (the rejected resources, or all when accepted)")
	if err := flags.Parse(args); err != nil {
		return exitUndecided
	}
	if *historyPath == "" || flags.NArg() != 0 || *timeout <= 0 {
		fmt.Fprintln(stderr, "usage: porcupine --history FILE [--timeout 60s] [--visualize out.html]")
		return exitUndecided
	}

	h, err := readHistoryFile(*historyPath)
	if err != nil {
		fmt.Fprintf(stderr, "porcupine: malformed history: %v\n", err)
		return exitUndecided
	}
	locks, err := buildLocks(h)
	if err != nil {
		var ie *inputError
		if errors.As(err, &ie) {
			err = fmt.Errorf("%s:%s", *historyPath, ie.msg)
		}
		fmt.Fprintf(stderr, "porcupine: inconsistent history: %v\n", err)
		return exitUndecided
	}
	report := checkLocks(locks, time.Now().Add(*timeout))
	return conclude(report, *historyPath, *timeout, *visualizePath, stdout, stderr)
}

// conclude prints the verdict, explains the rejected resources, writes the
// visualization if asked, and returns the exit status.
func conclude(report *checkReport, historyPath string, timeout time.Duration, visualizePath string, stdout, stderr io.Writer) int {
	locks := report.locks
	rejected := report.with(porcupine.Illegal)
	undecided := report.with(porcupine.Unknown)

	var notes []porcupine.Annotation
	for i, rr := range rejected {
		if i == explainedAtMost {
			fmt.Fprintf(stdout, "... and %d more resources not linearizable:", len(rejected)-explainedAtMost)
			for _, more := range rejected[explainedAtMost:] {
				fmt.Fprintf(stdout, " %q", more.ro.resource)
			}
			fmt.Fprintln(stdout)
			break
		}
		fmt.Fprintf(stdout, "NOT LINEARIZABLE: resource %q (%d grants)\n", rr.ro.resource, len(rr.ro.ops))
		notes = append(notes, explain(stdout, rr.ro, timeout)...)
	}
	if visualizePath != "" {
		shown := make([]*resourceOps, 0, len(rejected))
		for _, rr := range rejected {
			shown = append(shown, rr.ro)
		}
		if len(shown) == 0 {
			shown = locks.resources
		}
		if err := visualize(visualizePath, locks, shown, notes, timeout); err != nil {
			fmt.Fprintf(stderr, "porcupine: visualization: %v\n", err)
			return exitUndecided
		}
		fmt.Fprintf(stdout, "visualization: %s (%d resources)\n", visualizePath, len(shown))
	}

	switch {
	case len(rejected) > 0:
		fmt.Fprintf(stdout, "rejected: %d of %d resources not linearizable (%s)\n", len(rejected), len(report.results), historyPath)
		return exitRejected
	case len(undecided) > 0:
		fmt.Fprintf(stdout, "undecided: %d resources not decided within %s, e.g. %q (%d grants); an undecided check is no pass (%s)\n",
			len(undecided), timeout, undecided[0].ro.resource, len(undecided[0].ro.ops), historyPath)
		return exitUndecided
	default:
		fmt.Fprintf(stdout, "accepted: %s (%s)\n", report.summary(), historyPath)
		return exitAccepted
	}
}
