// Command runner is the Go client's conformance runner: it runs
// clients/conformance/scenarios.json through the redlockd Go module's public
// API (Dial, Client, Lease, Campaign, Leadership, Leader, Observe, Resign,
// Proclaim, the Err* kinds with errors.Is).
//
// Usage: runner SCENARIOS ENV (started by clients/conformance/harness.py,
// whose docstring describes ENV and the line protocol on stdout/stdin).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	redlockd "github.com/redlockd/redlockd/clients/go"
)

// stepLimit is how long a step that waits for an outcome may take by default.
const stepLimit = 30 * time.Second

// kinds is the scenario language's word for each error kind of the module.
var kinds = []struct {
	err  error
	word string
}{
	{redlockd.ErrHeld, "held_elsewhere"},
	{redlockd.ErrNotHeld, "not_held"},
	{redlockd.ErrUnavailable, "unavailable"},
	{redlockd.ErrDeadlineExceeded, "deadline"},
	{redlockd.ErrInvalidArgument, "invalid_argument"},
	{redlockd.ErrResourceExhausted, "resource_exhausted"},
	{redlockd.ErrUnauthenticated, "unauthenticated"},
	{redlockd.ErrPermissionDenied, "permission_denied"},
	{redlockd.ErrLost, "lost"},
}

// Step is one step of a scenario (see clients/conformance/README.md).
type Step struct {
	Op         string `json:"op"`
	Client     string `json:"client"`
	Resource   string `json:"resource"`
	TTLMs      int64  `json:"ttl_ms"`
	WaitMs     *int64 `json:"wait_ms"`
	DeadlineMs *int64 `json:"deadline_ms"`
	WithinMs   *int64 `json:"within_ms"`
	Ms         int64  `json:"ms"`
	Save       string `json:"save"`
	Lock       string `json:"lock"`
	Lease      string `json:"lease"`
	Pending    string `json:"pending"`
	Name       string `json:"name"`
	Error      string `json:"error"`
	MaySucceed bool   `json:"may_succeed"`
	Field      string `json:"field"`
	WasHeld    *bool  `json:"was_held"`
	Held       *bool  `json:"held"`
	FenceAbove any    `json:"fence_above"`
	FenceEqual any    `json:"fence_equal"`
	// Elections (Name is the election's name there).
	Value       string `json:"value"`
	As          string `json:"as"`
	ForMs       int64  `json:"for_ms"`
	TermAbove   any    `json:"term_above"`
	Term        any    `json:"term"`
	None        bool   `json:"none"`
	SkipNone    bool   `json:"skip_none"`
	Leadership  string `json:"leadership"`
	Than        any    `json:"than"`
	Observation string `json:"observation"`
	WasLeader   *bool  `json:"was_leader"`
}

type scenario struct {
	ID    string `json:"id"`
	Steps []Step `json:"steps"`
}

type clientSpec struct {
	Address string `json:"address"`
	Token   string `json:"token"`
	CAFile  string `json:"ca_file"`
	TLS     bool   `json:"tls"`
}

type environment struct {
	Prefix  string                `json:"prefix"`
	Clients map[string]clientSpec `json:"clients"`
}

type pending struct {
	done  chan struct{}
	lock  redlockd.Lock
	lease *redlockd.Lease
	err   error
}

// candidate is a Campaign under way (campaign_async).
type candidate struct {
	done       chan struct{}
	cancel     context.CancelFunc
	leadership *redlockd.Leadership
	err        error
}

// change is what an observation yielded.
type change struct {
	leader *redlockd.Leader
	err    error
}

type observation struct {
	changes chan change
	cancel  context.CancelFunc
	// last is the last leader observed (nil: none yet), which the next
	// must come after.
	last *redlockd.Leader
}

type state struct {
	locks   map[string]redlockd.Lock
	leases  map[string]*redlockd.Lease
	pending map[string]*pending
	fences  map[string]uint64
	// Elections, by the steps' names (a leadership's term is in fences).
	leaderships  map[string]*redlockd.Leadership
	candidates   map[string]*candidate
	observations map[string]*observation
}

type runner struct {
	env     environment
	clients map[string]*redlockd.Client
	answers *bufio.Scanner
}

func (r *runner) client(name string) (*redlockd.Client, error) {
	if c, ok := r.clients[name]; ok {
		return c, nil
	}
	spec, ok := r.env.Clients[name]
	if !ok {
		return nil, fmt.Errorf("unknown client %q", name)
	}
	var opts []redlockd.DialOption
	address := spec.Address
	if spec.Token != "" {
		opts = append(opts, redlockd.WithToken(spec.Token))
	}
	if spec.CAFile != "" {
		pem, err := os.ReadFile(spec.CAFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, redlockd.WithCACert(pem))
	} else if spec.TLS {
		address = "https://" + address
	}
	c, err := redlockd.Dial(address, opts...)
	if err != nil {
		return nil, err
	}
	r.clients[name] = c
	return c, nil
}

func kindOf(err error) string {
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			return k.word
		}
	}
	return fmt.Sprintf("other(%v)", err)
}

// outcome checks err against the error the step expects (or none).
func outcome(step Step, err error) error {
	if err == nil {
		if step.Error != "" {
			return fmt.Errorf("expected %s, got success", step.Error)
		}
		return nil
	}
	got := kindOf(err)
	if step.Error == "" {
		return fmt.Errorf("expected success, got %s: %v", got, err)
	}
	if got != step.Error {
		return fmt.Errorf("expected %s, got %s: %v", step.Error, got, err)
	}
	if step.Field != "" {
		var e *redlockd.Error
		if !errors.As(err, &e) || e.Field != step.Field {
			field := ""
			if e != nil {
				field = e.Field
			}
			return fmt.Errorf("expected field %s, got %q (%v)", step.Field, field, err)
		}
	}
	return nil
}

func fenceOf(st *state, ref any) (uint64, error) {
	switch v := ref.(type) {
	case float64:
		return uint64(v), nil
	case string:
		f, ok := st.fences[v]
		if !ok {
			return 0, fmt.Errorf("no fence saved as %q", v)
		}
		return f, nil
	}
	return 0, fmt.Errorf("bad fence reference %v", ref)
}

func checkFence(step Step, st *state, fence uint64) error {
	if step.FenceAbove != nil {
		floor, err := fenceOf(st, step.FenceAbove)
		if err != nil {
			return err
		}
		if fence <= floor {
			return fmt.Errorf("fence %d not above %d", fence, floor)
		}
	}
	if step.FenceEqual != nil {
		other, err := fenceOf(st, step.FenceEqual)
		if err != nil {
			return err
		}
		if fence != other {
			return fmt.Errorf("fence %d differs from %d", fence, other)
		}
	}
	return nil
}

func (r *runner) checkLock(step Step, st *state, lock redlockd.Lock) error {
	if err := checkFence(step, st, lock.Fence); err != nil {
		return err
	}
	if step.Save != "" {
		st.locks[step.Save] = lock
		st.fences[step.Save] = lock.Fence
	}
	return nil
}

func (r *runner) acquire(step Step) (redlockd.Lock, error) {
	c, err := r.client(step.Client)
	if err != nil {
		return redlockd.Lock{}, err
	}
	var opts []redlockd.AcquireOption
	if step.WaitMs != nil {
		opts = append(opts, redlockd.WithWait(time.Duration(*step.WaitMs)*time.Millisecond))
	}
	ctx := context.Background()
	if step.DeadlineMs != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(*step.DeadlineMs)*time.Millisecond)
		defer cancel()
	}
	resource := strings.ReplaceAll(step.Resource, "{prefix}", r.env.Prefix)
	return c.Acquire(ctx, resource, time.Duration(step.TTLMs)*time.Millisecond, opts...)
}

// hold opens a session. Its context lives as long as the scenario (Hold's
// contract: the context bounds the whole session); no step gives a Hold a
// deadline_ms, which in Go would end a granted session too.
func (r *runner) hold(step Step) (*redlockd.Lease, error) {
	c, err := r.client(step.Client)
	if err != nil {
		return nil, err
	}
	if step.DeadlineMs != nil {
		return nil, fmt.Errorf("a Hold step with deadline_ms is not supported by this runner")
	}
	var opts []redlockd.AcquireOption
	if step.WaitMs != nil {
		opts = append(opts, redlockd.WithWait(time.Duration(*step.WaitMs)*time.Millisecond))
	}
	resource := strings.ReplaceAll(step.Resource, "{prefix}", r.env.Prefix)
	return c.Hold(context.Background(), resource, time.Duration(step.TTLMs)*time.Millisecond, opts...)
}

func within(step Step) time.Duration {
	if step.WithinMs != nil {
		return time.Duration(*step.WithinMs) * time.Millisecond
	}
	return stepLimit
}

func until(limit time.Duration, what string, done func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not within %v", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *runner) step(step Step, st *state) error {
	ctx := context.Background()
	switch step.Op {
	case "acquire":
		lock, err := r.acquire(step)
		if err == nil && step.MaySucceed {
			// Granted after all (the race went the other way): released at
			// once, so that the step leaves nothing held either way.
			c, err := r.client(step.Client)
			if err != nil {
				return err
			}
			held, err := c.Release(ctx, lock)
			if err != nil || !held {
				return fmt.Errorf("the lock granted was no longer held when released (%v)", err)
			}
			return nil
		}
		if err := outcome(step, err); err != nil || step.Error != "" {
			return err
		}
		return r.checkLock(step, st, lock)
	case "acquire_async":
		p := &pending{done: make(chan struct{})}
		st.pending[step.Pending] = p
		go func() {
			defer close(p.done)
			p.lock, p.err = r.acquire(step)
		}()
		return nil
	case "await":
		p := st.pending[step.Pending]
		select {
		case <-p.done:
		case <-time.After(within(step)):
			return fmt.Errorf("the pending call did not finish within %v", within(step))
		}
		if err := outcome(step, p.err); err != nil || step.Error != "" {
			return err
		}
		return r.checkLock(step, st, p.lock)
	case "extend":
		c, err := r.client(step.Client)
		if err != nil {
			return err
		}
		lock, err := c.Extend(ctx, st.locks[step.Lock], time.Duration(step.TTLMs)*time.Millisecond)
		if err := outcome(step, err); err != nil || step.Error != "" {
			return err
		}
		return r.checkLock(step, st, lock)
	case "release":
		c, err := r.client(step.Client)
		if err != nil {
			return err
		}
		wasHeld, err := c.Release(ctx, st.locks[step.Lock])
		if err := outcome(step, err); err != nil || step.Error != "" {
			return err
		}
		if step.WasHeld != nil && wasHeld != *step.WasHeld {
			return fmt.Errorf("was_held %v, expected %v", wasHeld, *step.WasHeld)
		}
		return nil
	case "validate":
		c, err := r.client(step.Client)
		if err != nil {
			return err
		}
		v, err := c.Validate(ctx, st.locks[step.Lock])
		if err := outcome(step, err); err != nil || step.Error != "" {
			return err
		}
		if step.Held != nil && v.Held != *step.Held {
			return fmt.Errorf("held %v, expected %v", v.Held, *step.Held)
		}
		return nil
	case "wait_expired":
		c, err := r.client(step.Client)
		if err != nil {
			return err
		}
		return until(within(step), "expiry", func() (bool, error) {
			v, err := c.Validate(ctx, st.locks[step.Lock])
			return err == nil && !v.Held, err
		})
	case "hold":
		lease, err := r.hold(step)
		if err := outcome(step, err); err != nil || step.Error != "" {
			return err
		}
		st.leases[step.Lease] = lease
		st.fences[step.Lease] = lease.Fence()
		return checkFence(step, st, lease.Fence())
	case "hold_async":
		p := &pending{done: make(chan struct{})}
		st.pending[step.Pending] = p
		go func() {
			defer close(p.done)
			p.lease, p.err = r.hold(step)
		}()
		return nil
	case "await_hold":
		p := st.pending[step.Pending]
		select {
		case <-p.done:
		case <-time.After(within(step)):
			return fmt.Errorf("the pending session was not granted or refused within %v", within(step))
		}
		if p.lease != nil {
			st.leases[step.Lease] = p.lease
		}
		if err := outcome(step, p.err); err != nil || step.Error != "" {
			return err
		}
		st.fences[step.Lease] = p.lease.Fence()
		return checkFence(step, st, p.lease.Fence())
	case "check":
		return outcome(step, st.leases[step.Lease].Err())
	case "release_lease":
		lease := st.leases[step.Lease]
		delete(st.leases, step.Lease)
		wasHeld, err := lease.Release(ctx)
		if err := outcome(step, err); err != nil || step.Error != "" {
			return err
		}
		if step.WasHeld != nil && wasHeld != *step.WasHeld {
			return fmt.Errorf("was_held %v, expected %v", wasHeld, *step.WasHeld)
		}
		return nil
	case "await_lost":
		select {
		case <-st.leases[step.Lease].Done():
			return nil
		case <-time.After(within(step)):
			return fmt.Errorf("lost (Done) not within %v", within(step))
		}
	case "await_draining":
		lease := st.leases[step.Lease]
		return until(within(step), "draining", func() (bool, error) { return lease.Draining(), nil })
	case "campaign", "campaign_async", "expect_not_elected", "await_elected", "expect_term_above",
		"leader", "resign", "resign_token", "proclaim", "await_leadership_lost", "observe",
		"observe_next", "close_observation":
		return r.electionStep(step, st)
	case "pause":
		time.Sleep(time.Duration(step.Ms) * time.Millisecond)
		return nil
	case "fault":
		fmt.Printf("FAULT %s\n", step.Name)
		if !r.answers.Scan() {
			return fmt.Errorf("no answer from the harness for fault %s", step.Name)
		}
		if answer := strings.TrimSpace(r.answers.Text()); answer != "ok" {
			return fmt.Errorf("the harness could not inject %s: %s", step.Name, answer)
		}
		return nil
	}
	return fmt.Errorf("unknown op %s", step.Op)
}

func (r *runner) run(sc scenario) error {
	st := &state{
		locks:        map[string]redlockd.Lock{},
		leases:       map[string]*redlockd.Lease{},
		pending:      map[string]*pending{},
		fences:       map[string]uint64{},
		leaderships:  map[string]*redlockd.Leadership{},
		candidates:   map[string]*candidate{},
		observations: map[string]*observation{},
	}
	defer func() {
		for _, lease := range st.leases {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = lease.Release(ctx)
			cancel()
		}
		for _, l := range st.leaderships {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = l.Resign(ctx)
			cancel()
		}
		// A candidacy still waiting is withdrawn (its context cancelled),
		// which also ends a leadership won meanwhile.
		for _, c := range st.candidates {
			c.cancel()
		}
		for _, o := range st.observations {
			o.cancel()
		}
	}()
	for i, step := range sc.Steps {
		if err := r.step(step, st); err != nil {
			return fmt.Errorf("step %d (%s): %w", i, step.Op, err)
		}
	}
	return nil
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: runner SCENARIOS ENV")
		os.Exit(64)
	}
	var file struct {
		Scenarios []scenario `json:"scenarios"`
	}
	var env environment
	for path, into := range map[string]any{os.Args[1]: &file, os.Args[2]: &env} {
		data, err := os.ReadFile(path)
		if err == nil {
			err = json.Unmarshal(data, into)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "runner: %s: %v\n", path, err)
			os.Exit(1)
		}
	}
	r := &runner{env: env, clients: map[string]*redlockd.Client{}, answers: bufio.NewScanner(os.Stdin)}
	failed := 0
	for _, sc := range file.Scenarios {
		if err := r.run(sc); err != nil {
			failed++
			fmt.Printf("FAIL %s %v\n", sc.ID, err)
		} else {
			fmt.Printf("PASS %s\n", sc.ID)
		}
	}
	for _, c := range r.clients {
		_ = c.Close()
	}
	if failed > 0 {
		os.Exit(1)
	}
}

func (r *runner) electionName(step Step) string {
	return strings.ReplaceAll(step.Name, "{prefix}", r.env.Prefix)
}

// campaign stands as a candidate with ctx bounding the whole session (Go's
// Campaign contract): the scenario's steps end the leadership by Resign.
func (r *runner) campaign(ctx context.Context, step Step) (*redlockd.Leadership, error) {
	c, err := r.client(step.Client)
	if err != nil {
		return nil, err
	}
	return c.Campaign(ctx, r.electionName(step), step.Value,
		redlockd.WithLeadershipTTL(time.Duration(step.TTLMs)*time.Millisecond))
}

// elected records a leadership under the step's `as` and checks term_above.
func elected(step Step, st *state, l *redlockd.Leadership) error {
	st.leaderships[step.As] = l
	st.fences[step.As] = l.Term()
	if step.TermAbove != nil {
		floor, err := fenceOf(st, step.TermAbove)
		if err != nil {
			return err
		}
		if l.Term() <= floor {
			return fmt.Errorf("term %d not above %d", l.Term(), floor)
		}
	}
	return nil
}

// checkLeader checks `none`, or `value` and `term` (a leadership's name or
// a number).
func checkLeader(step Step, st *state, leader *redlockd.Leader) error {
	if step.None {
		if leader != nil {
			return fmt.Errorf("expected no leader, got %v", leader)
		}
		return nil
	}
	if leader == nil {
		return fmt.Errorf("expected a leader, got none")
	}
	if step.Value != "" && leader.Value != step.Value {
		return fmt.Errorf("leader value %q, expected %q", leader.Value, step.Value)
	}
	if step.Term != nil {
		term, err := fenceOf(st, step.Term)
		if err != nil {
			return err
		}
		if leader.Term != term {
			return fmt.Errorf("leader term %d, expected %d", leader.Term, term)
		}
	}
	return nil
}

// after says whether leader comes after last (nil: nothing yet) in
// (term, value version) order.
func after(leader, last *redlockd.Leader) bool {
	switch {
	case last == nil:
		return true
	case leader.Term != last.Term:
		return leader.Term > last.Term
	default:
		return leader.ValueVersion > last.ValueVersion
	}
}

func checkWasLeader(step Step, wasLeader bool) error {
	if step.WasLeader != nil && wasLeader != *step.WasLeader {
		return fmt.Errorf("was_leader %v, expected %v", wasLeader, *step.WasLeader)
	}
	return nil
}

func (r *runner) electionStep(step Step, st *state) error {
	ctx := context.Background()
	switch step.Op {
	case "campaign":
		// The wait is bounded by canceling the session's context only while
		// Campaign has not returned (a deadline on it would end the
		// leadership too).
		limit := stepLimit
		if step.DeadlineMs != nil {
			limit = time.Duration(*step.DeadlineMs) * time.Millisecond
		}
		session, cancel := context.WithCancel(context.Background())
		timer := time.AfterFunc(limit, cancel)
		l, err := r.campaign(session, step)
		if !timer.Stop() && err == nil {
			cancel()
			return fmt.Errorf("elected only as the step's limit (%v) ran out", limit)
		}
		if err != nil {
			cancel()
		} else {
			// Resigned at the scenario's end even if the step expected an error.
			st.leaderships[step.As] = l
		}
		if err := outcome(step, err); err != nil || step.Error != "" {
			return err
		}
		return elected(step, st, l)
	case "campaign_async":
		session, cancel := context.WithCancel(context.Background())
		c := &candidate{done: make(chan struct{}), cancel: cancel}
		st.candidates[step.Pending] = c
		go func() {
			defer close(c.done)
			c.leadership, c.err = r.campaign(session, step)
		}()
		return nil
	case "expect_not_elected":
		c := st.candidates[step.Pending]
		select {
		case <-c.done:
			if c.err != nil {
				return fmt.Errorf("the candidacy failed: %s", kindOf(c.err))
			}
			return fmt.Errorf("elected while another leads: %v", c.leadership)
		case <-time.After(time.Duration(step.ForMs) * time.Millisecond):
			return nil
		}
	case "await_elected":
		c := st.candidates[step.Pending]
		select {
		case <-c.done:
		case <-time.After(within(step)):
			return fmt.Errorf("the pending candidate was not elected within %v", within(step))
		}
		if c.err != nil {
			c.cancel()
			delete(st.candidates, step.Pending)
		}
		if err := outcome(step, c.err); err != nil || step.Error != "" {
			return err
		}
		// The leadership now ends by Resign (the context stays open until
		// the scenario's end, when cancelling it is harmless).
		return elected(step, st, c.leadership)
	case "expect_term_above":
		term, err := fenceOf(st, step.Leadership)
		if err != nil {
			return err
		}
		floor, err := fenceOf(st, step.Than)
		if err != nil {
			return err
		}
		if term <= floor {
			return fmt.Errorf("term %d not above %d", term, floor)
		}
		return nil
	case "leader":
		c, err := r.client(step.Client)
		if err != nil {
			return err
		}
		leader, err := c.Leader(ctx, r.electionName(step))
		if err := outcome(step, err); err != nil || step.Error != "" {
			return err
		}
		return checkLeader(step, st, leader)
	case "resign":
		l := st.leaderships[step.Leadership]
		delete(st.leaderships, step.Leadership)
		wasLeader, err := l.Resign(ctx)
		if err := outcome(step, err); err != nil || step.Error != "" {
			return err
		}
		return checkWasLeader(step, wasLeader)
	case "resign_token":
		c, err := r.client(step.Client)
		if err != nil {
			return err
		}
		wasLeader, err := c.Resign(ctx, r.electionName(step), st.leaderships[step.Leadership].Token())
		if err := outcome(step, err); err != nil || step.Error != "" {
			return err
		}
		return checkWasLeader(step, wasLeader)
	case "proclaim":
		l, ok := st.leaderships[step.Leadership]
		if !ok {
			return fmt.Errorf("no leadership %q to proclaim by", step.Leadership)
		}
		return outcome(step, l.Proclaim(ctx, step.Value))
	case "await_leadership_lost":
		l := st.leaderships[step.Leadership]
		select {
		case <-l.Done():
		case <-time.After(within(step)):
			return fmt.Errorf("lost (Done) not within %v", within(step))
		}
		if !errors.Is(l.Err(), redlockd.ErrLost) {
			return fmt.Errorf("Err() after Done: %v, expected lost", l.Err())
		}
		return nil
	case "observe":
		c, err := r.client(step.Client)
		if err != nil {
			return err
		}
		session, cancel := context.WithCancel(context.Background())
		o := &observation{changes: make(chan change, 64), cancel: cancel}
		st.observations[step.As] = o
		name := r.electionName(step)
		go func() {
			for leader, err := range c.Observe(session, name) {
				select {
				case o.changes <- change{leader, err}:
				case <-session.Done():
					return
				}
			}
		}()
		return nil
	case "observe_next":
		o := st.observations[step.Observation]
		timeout := time.After(within(step))
		for {
			var ch change
			select {
			case ch = <-o.changes:
			case <-timeout:
				return fmt.Errorf("no change observed within %v", within(step))
			}
			if ch.err != nil {
				return fmt.Errorf("the observation ended: %s: %v", kindOf(ch.err), ch.err)
			}
			if ch.leader != nil {
				// Along one observation each leader comes after the one
				// before: a higher term, or the same term's proclaimed
				// value (a higher value version).
				if !after(ch.leader, o.last) {
					return fmt.Errorf("observed %v after %v", ch.leader, o.last)
				}
				o.last = ch.leader
			}
			if ch.leader == nil && step.SkipNone && !step.None {
				continue
			}
			return checkLeader(step, st, ch.leader)
		}
	case "close_observation":
		st.observations[step.Observation].cancel()
		delete(st.observations, step.Observation)
		return nil
	}
	return fmt.Errorf("unknown op %s", step.Op)
}
