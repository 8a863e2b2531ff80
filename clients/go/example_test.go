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
