package redlockd_test

import (
	"context"
	"fmt"
	"log"
	"time"

	redlockd "github.com/redlockd/redlockd/clients/go"
)

// Hold a lock while doing work under it: the lease's Context is cancelled
// the moment the lock is lost, and every write carries the fence.
func ExampleClient_Hold() {
	client, err := redlockd.Dial(shared.addr) // e.g. "127.0.0.1:50051"; WithToken, WithCACert as needed
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx := context.Background()
	lease, err := client.Hold(ctx, "orders/42", 10*time.Second, redlockd.WithWait(5*time.Second))
	if err != nil {
		log.Fatal(err) // errors.Is(err, redlockd.ErrHeld): someone else kept it for the whole wait
	}
	work := lease.Context() // hand it to the work: cancelled when the lock is gone
	select {
	case <-work.Done():
		log.Fatal(lease.Err()) // lost: stop, the writes below would be unsafe
	default:
		fmt.Println("holding orders/42 with a fence:", lease.Fence() > 0)
	}
	wasHeld, err := lease.Release(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("released; held until then:", wasHeld)
	// Output:
	// holding orders/42 with a fence: true
	// released; held until then: true
}

// Stand for election: Campaign blocks until this candidate leads, and the
// leadership's Context is cancelled the moment it is lost. The term fences
// the leader's writes.
func ExampleClient_Campaign() {
	client, err := redlockd.Dial(shared.addr) // e.g. "127.0.0.1:50051"
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx := context.Background()
	leadership, err := client.Campaign(ctx, "jobs/scheduler", "pod-a", redlockd.WithLeadershipTTL(10*time.Second))
	if err != nil {
		log.Fatal(err) // ctx ended while waiting, or the daemon refused
	}
	work := leadership.Context() // hand it to the leader's work: cancelled when the leadership is gone
	select {
	case <-work.Done():
		log.Fatal(leadership.Err()) // lost: stop acting as leader
	default:
		fmt.Println("leading jobs/scheduler with a term:", leadership.Term() > 0)
	}
	leader, err := client.Leader(ctx, "jobs/scheduler") // what everyone else sees
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the leader is", leader.Value)
	wasLeader, err := leadership.Resign(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("resigned; led until then:", wasLeader)
	// Output:
	// leading jobs/scheduler with a term: true
	// the leader is pod-a
	// resigned; led until then: true
}

// Follow an election's leader: the current one first, then each change,
// in term order, until ctx ends or the loop breaks.
func ExampleClient_Observe() {
	client, err := redlockd.Dial(shared.addr)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx := context.Background()
	leadership, err := client.Campaign(ctx, "jobs/reports", "pod-b")
	if err != nil {
		log.Fatal(err)
	}
	for leader, err := range client.Observe(ctx, "jobs/reports") {
		if err != nil {
			log.Fatal(err) // the stream broke: observe again
		}
		if leader == nil {
			fmt.Println("no leader")
			break // a real follower keeps ranging
		}
		fmt.Println("leader:", leader.Value)
		if _, err := leadership.Resign(ctx); err != nil { // the next change: no leader
			log.Fatal(err)
		}
	}
	// Output:
	// leader: pod-b
	// no leader
}
