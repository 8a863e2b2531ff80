package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"slices"
	"time"
)

// out holds what w1 and w2 print: the markers and samples for the bench
// (when parent), then the JSON line.
type out struct {
	parent bool
	w      *bufio.Writer
}

func newOut(parent bool) *out {
	return &out{parent: parent, w: bufio.NewWriterSize(os.Stdout, 1<<16)}
}

// marker prints a line for the bench at once (only under it).
func (o *out) marker(line string) error {
	if !o.parent {
		return nil
	}
	if _, err := o.w.WriteString(line + "\n"); err != nil {
		return err
	}
	return o.w.Flush()
}

// done marks the window's end; under the bench, waits until stdin closes,
// once the bench has read this process's CPU.
func (o *out) done() error {
	if !o.parent {
		return nil
	}
	if err := o.marker("done"); err != nil {
		return err
	}
	_, err := io.Copy(io.Discard, os.Stdin)
	return err
}

// sample prints one sample line for the bench (only under it).
func (o *out) sample(line string) {
	if o.parent {
		_, _ = o.w.WriteString(line + "\n")
	}
}

// finish prints the JSON line, last.
func (o *out) finish(figures any) error {
	line, err := json.Marshal(figures)
	if err != nil {
		return err
	}
	if _, err := o.w.Write(append(line, '\n')); err != nil {
		return err
	}
	return o.w.Flush()
}

// permilleUS is the nearest-rank percentile p (in per mille: 500 = p50)
// of a sorted sample, in microseconds (-1: empty), the rule the bench uses.
func permilleUS(sorted []time.Duration, p int) int64 {
	if len(sorted) == 0 {
		return -1
	}
	rank := max((len(sorted)*p+999)/1000, 1)
	return sorted[rank-1].Microseconds()
}

// sortedCopy returns the sample, sorted.
func sortedCopy(sample []time.Duration) []time.Duration {
	sorted := slices.Clone(sample)
	slices.Sort(sorted)
	return sorted
}
