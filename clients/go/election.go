package redlockd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"time"

	"google.golang.org/grpc/codes"

	pb "github.com/redlockd/redlockd/clients/go/redlockv1"
)

// DefaultLeadershipTTL is a Campaign's leadership ttl unless
// WithLeadershipTTL says otherwise: how long a frozen or killed leader
// keeps the leadership, so about how long a standby waits to take over.
const DefaultLeadershipTTL = 10 * time.Second

// campaignConfig collects what the CampaignOptions ask for.
type campaignConfig struct {
	ttl time.Duration
}

// CampaignOption configures Campaign.
type CampaignOption func(*campaignConfig)

// WithLeadershipTTL sets the leadership's ttl (DefaultLeadershipTTL if
// unset; at least the daemon's session.min_ttl): the daemon extends it
// while the Campaign session lasts, and a leader that freezes or vanishes
// keeps it for up to this long.
func WithLeadershipTTL(ttl time.Duration) CampaignOption {
	return func(c *campaignConfig) { c.ttl = ttl }
}

// Leader is an election's current leader as anyone may see it (no token).
type Leader struct {
	// Name is the election's name.
	Name string
	// Value is what the leader campaigned with.
	Value string
	// Term is the leadership's fence: strictly greater than every earlier
	// leader's term of the same election.
	Term uint64
	// Since is when the leadership began, by the masters' clocks (zero if
	// the daemon did not say).
	Since time.Time
	// Remaining is how long the leadership stays held at least, as a
	// majority of masters saw it when the daemon read it.
	Remaining time.Duration
	// ValueVersion is 0 for the value the leader campaigned with, and
	// higher after each Proclaim of the same term (not a count: a retried
	// Proclaim may skip numbers). A leader's value can change while its
	// Term stays, so (Term, ValueVersion) orders what observers see, not
	// Term alone.
	ValueVersion uint64
}

// String shows the leader.
func (l Leader) String() string {
	return fmt.Sprintf("Leader{Name: %q, Value: %q, Term: %d, ValueVersion: %d, Remaining: %s}",
		l.Name, l.Value, l.Term, l.ValueVersion, l.Remaining)
}

// leaderFromWire converts the contract's Leader (nil when has is false).
func leaderFromWire(has bool, w *pb.Leader) *Leader {
	if !has || w == nil {
		return nil
	}
	l := &Leader{
		Name:         w.GetName(),
		Value:        w.GetValue(),
		Term:         w.GetTerm(),
		Remaining:    w.GetRemaining().AsDuration(),
		ValueVersion: w.GetValueVersion(),
	}
	if w.GetSince() != nil {
		l.Since = w.GetSince().AsTime()
	}
	return l
}

// Leader reads the election's current leader from a majority of masters:
// nil (and no error) when it has none. A context without a deadline gets
// the call timeout.
func (c *Client) Leader(ctx context.Context, name string) (*Leader, error) {
	if name == "" {
		return nil, invalidArgument("Leader", "name", "must not be empty")
	}
	ctx, cancel := c.withDefaultDeadline(ctx, 0)
	defer cancel()
	resp, err := c.election.Leader(ctx, &pb.LeaderRequest{Name: name})
	if err != nil {
		return nil, fromRPC("Leader", err)
	}
	return leaderFromWire(resp.GetHasLeader(), resp.GetLeader()), nil
}

// Observe streams the election's leader changes: ranging over it opens an
// Observe stream (each range its own) and yields the current leader first
// (nil: none), then each change: a new leader (a higher term than any
// yielded before), a new value of the same leader (its Proclaim: the same
// term, a higher ValueVersion), or nil (the leader is gone, none yet
// elected). Each leader yielded comes after the one before it in
// (Term, ValueVersion) order.
//
// It ends without an error when ctx ends or the loop breaks. Otherwise it
// ends with one last (nil, err): an *Error (ErrUnavailable when too few
// masters answered, or the daemon stopped or went away: observe again,
// perhaps on another replica, and ignore a leader that does not come
// after the last seen: a lower term, or the same term and a ValueVersion
// not above).
func (c *Client) Observe(ctx context.Context, name string) iter.Seq2[*Leader, error] {
	return func(yield func(*Leader, error) bool) {
		if name == "" {
			yield(nil, invalidArgument("Observe", "name", "must not be empty"))
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream, err := c.election.Observe(ctx, &pb.ObserveRequest{Name: name})
		if err != nil {
			if ctx.Err() == nil {
				yield(nil, fromRPC("Observe", err))
			}
			return
		}
		for {
			resp, err := stream.Recv()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if errors.Is(err, io.EOF) {
					err = newError("Observe", codes.Unavailable, "the daemon ended the stream (it is stopping)", nil)
				}
				yield(nil, fromRPC("Observe", err))
				return
			}
			if !yield(leaderFromWire(resp.GetHasLeader(), resp.GetLeader()), nil) {
				return
			}
		}
	}
}

// Resign ends the leadership of the election name that token proves (a
// Leadership's Token), from outside its Campaign session: the next
// candidate may be elected at once, and that session learns it at its next
// extension (its Leadership ends, lost). wasLeader false means the
// leadership was already over. A context without a deadline gets the call
// timeout.
func (c *Client) Resign(ctx context.Context, name, token string) (wasLeader bool, err error) {
	if name == "" {
		return false, invalidArgument("Resign", "name", "must not be empty")
	}
	if token == "" {
		return false, invalidArgument("Resign", "token", "must not be empty")
	}
	ctx, cancel := c.withDefaultDeadline(ctx, 0)
	defer cancel()
	resp, err := c.election.Resign(ctx, &pb.ResignRequest{Name: name, Token: token})
	if err != nil {
		return false, fromRPC("Resign", err)
	}
	return resp.GetWasLeader(), nil
}
