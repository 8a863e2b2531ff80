// Command redlockd-peers runs the lock services redlockd's bench compares
// it with, so that every figure is a ratio within one run on one machine:
//
//   - redsync: go-redsync v4 (Redlock) over go-redis v9, one pool per
//     master, against the masters the bench started;
//   - etcd: etcd 3.7's own client and recipe, concurrency.Mutex, against
//     an embedded one-member etcd (the etcd-server subcommand).
//
// Usage:
//
//	redlockd-peers etcd-server --data-dir DIR --client HOST:PORT --peer HOST:PORT
//	redlockd-peers w1 --peer redsync|etcd --concurrency C --duration D (--nodes URLS | --etcd HOST:PORT)
//	redlockd-peers w2 --peer redsync|etcd --contenders N --duration D (--nodes URLS | --etcd HOST:PORT)
//
// etcd-server prints "ready URL" once it serves, and stops on SIGTERM. It
// is a process of its own so that the bench reads its CPU apart from the
// client's. w1 and w2 print one JSON line of figures. Under redlockd-bench
// (--parent) they also print "measuring" and "done" around the measured
// window, wait after "done" until their stdin closes (the bench reads this
// process's CPU from /proc meanwhile, so nothing after the window counts),
// then print every sample before the JSON line: the bench computes every
// mode's percentiles and hand-offs with the same code.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "etcd-server":
		err = etcdServer(os.Args[2:])
	case "w1":
		err = w1(os.Args[2:])
	case "w2":
		err = w2(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "redlockd-peers %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: redlockd-peers etcd-server|w1|w2 [flags] (-h: the flags of each)")
	os.Exit(64)
}
