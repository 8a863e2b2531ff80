package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
)

// The history file's records (tools/chaos/HISTORY.md), checked and typed.
// Parsing is strict about what the check relies on (required fields, the
// enumerated values, times that run forward) and ignores fields it does not
// use, so the writer can add some without breaking the reader.

// kind is an acquire's kind.
type kind uint8

const (
	kindPlain kind = iota
	kindShared
	kindPermit
	kindMulti
	// kindLeader is an election's leadership: exclusive on its election's
	// resource, as a plain lock is on its own.
	kindLeader
)

func (k kind) String() string {
	return [...]string{"plain", "shared", "permit", "multi", "leader"}[k]
}

// acquireOutcome is how an acquire ended.
type acquireOutcome uint8

const (
	acquireGranted acquireOutcome = iota
	acquireFailed
	acquireUnknown
)

// extendOutcome is how an extend ended.
type extendOutcome uint8

const (
	extendOK extendOutcome = iota
	extendLost
	extendFailed
	extendUnknown
)

// acquireRecord is one `acquire` line.
type acquireRecord struct {
	line      int
	id        string
	client    string
	kind      kind
	resources []string // one for every kind but multi, in the order asked
	limit     uint32   // permit only
	requestID string   // "" when absent
	invokeUS  int64
	outcome   acquireOutcome
	// The rest is set only when granted.
	completeUS int64
	token      string
	permit     uint32   // permit only
	fences     []uint64 // one per resource
	validityUS int64
}

// extendRecord is one `extend` line.
type extendRecord struct {
	line       int
	id         string
	grant      string
	invokeUS   int64
	completeUS int64 // set when the outcome is ok
	outcome    extendOutcome
	validityUS int64 // set when the outcome is ok
}

// releaseRecord is one `release` line. Only its send matters to the check:
// the holder gave the lock up then, whatever the answer.
type releaseRecord struct {
	line     int
	id       string
	grant    string
	invokeUS int64
}

// history is a parsed history file.
type history struct {
	acquires []*acquireRecord
	extends  []*extendRecord
	releases []*releaseRecord
}

// rawRecord is a line as written; pointers tell absent from zero.
type rawRecord struct {
	Type       *string     `json:"type"`
	ID         *scalarText `json:"id"`
	Client     *scalarText `json:"client"`
	Kind       *string     `json:"kind"`
	Resource   *string     `json:"resource"`
	Resources  []string    `json:"resources"`
	Limit      *uint32     `json:"limit"`
	RequestID  *string     `json:"request_id"`
	InvokeUS   *int64      `json:"invoke_us"`
	CompleteUS *int64      `json:"complete_us"`
	Outcome    *string     `json:"outcome"`
	Token      *scalarText `json:"token"`
	Permit     *uint32     `json:"permit"`
	Fence      *uint64     `json:"fence"`
	Fences     []uint64    `json:"fences"`
	ValidityUS *int64      `json:"validity_us"`
	Grant      *scalarText `json:"grant"`
}

// inputError is a malformed history: the check cannot run on it.
type inputError struct {
	msg string
}

func (e *inputError) Error() string { return e.msg }

func malformed(format string, args ...any) error {
	return &inputError{msg: fmt.Sprintf(format, args...)}
}

// readHistoryFile parses the history file at path.
func readHistoryFile(path string) (*history, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &inputError{msg: err.Error()} // names the path
	}
	defer f.Close()
	h, err := parseHistory(f)
	var ie *inputError
	if errors.As(err, &ie) {
		ie.msg = path + ":" + ie.msg
	}
	return h, err
}

// parseHistory reads JSON lines; blank lines are skipped. Errors name the
// line ("LINE: what"), the first bad one in the file. Lines are decoded on
// every processor: they are independent until ids are matched.
func parseHistory(r io.Reader) (*history, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, malformed(" %v", err)
	}
	lines := bytes.Split(data, []byte{'\n'})
	parsed := make([]parsedLine, len(lines))
	workers := runtime.GOMAXPROCS(0)
	chunk := (len(lines) + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < len(lines); lo += chunk {
		hi := min(lo+chunk, len(lines))
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				parsed[i] = parseLine(bytes.TrimSpace(lines[i]), i+1)
			}
		})
	}
	wg.Wait()

	h := &history{}
	ids := make(map[string]int, len(lines)) // id -> line
	for i, p := range parsed {
		switch {
		case p.err != nil:
			return nil, p.err
		case p.id == "": // a blank line
			continue
		}
		if first, dup := ids[p.id]; dup {
			return nil, malformed("%d: id %q already used on line %d", i+1, p.id, first)
		}
		ids[p.id] = i + 1
		switch {
		case p.acquire != nil:
			h.acquires = append(h.acquires, p.acquire)
		case p.extend != nil:
			h.extends = append(h.extends, p.extend)
		default:
			h.releases = append(h.releases, p.release)
		}
	}
	if len(ids) == 0 {
		return nil, malformed(" no records: an empty history proves nothing")
	}
	if err := h.linkGrants(ids); err != nil {
		return nil, err
	}
	return h, nil
}

// parsedLine is one line's record (one of the three), or why it is bad;
// all nil for a blank line.
type parsedLine struct {
	id      string
	acquire *acquireRecord
	extend  *extendRecord
	release *releaseRecord
	err     error
}

func parseLine(text []byte, line int) parsedLine {
	if len(text) == 0 {
		return parsedLine{}
	}
	var raw rawRecord
	if err := json.Unmarshal(text, &raw); err != nil {
		return parsedLine{err: malformed("%d: not a JSON object of the history format: %v", line, err)}
	}
	id, err := scalar(raw.ID, "id")
	if err != nil {
		return parsedLine{err: malformed("%d: %v", line, err)}
	}
	if raw.Type == nil {
		return parsedLine{err: malformed("%d: no \"type\"", line)}
	}
	p := parsedLine{id: id}
	switch *raw.Type {
	case "acquire":
		p.acquire, p.err = acquireFrom(&raw, line, id)
	case "extend":
		p.extend, p.err = extendFrom(&raw, line, id)
	case "release":
		p.release, p.err = releaseFrom(&raw, line, id)
	default:
		p.err = malformed("%d: unknown type %q (acquire, extend or release)", line, *raw.Type)
	}
	return p
}

// scalarText is an id-like field written as a JSON string or integer (the
// format does not fix which), as text.
type scalarText string

func (s *scalarText) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) >= 2 && b[0] == '"' && bytes.IndexByte(b, '\\') < 0:
		*s = scalarText(b[1 : len(b)-1])
		return nil
	case len(b) > 0 && b[0] == '"':
		var text string
		if err := json.Unmarshal(b, &text); err != nil {
			return err
		}
		*s = scalarText(text)
		return nil
	case string(b) == "null":
		return nil
	}
	if _, err := strconv.ParseInt(string(b), 10, 64); err != nil {
		if _, err := strconv.ParseUint(string(b), 10, 64); err != nil {
			return fmt.Errorf("neither a string nor an integer: %s", b)
		}
	}
	*s = scalarText(b)
	return nil
}

// scalar is a required id-like field's text.
func scalar(v *scalarText, field string) (string, error) {
	switch {
	case v == nil:
		return "", fmt.Errorf("no %q", field)
	case *v == "":
		return "", fmt.Errorf("empty %q", field)
	}
	return string(*v), nil
}

func acquireFrom(raw *rawRecord, line int, id string) (*acquireRecord, error) {
	bad := func(format string, args ...any) error {
		return malformed("%d: acquire %s: %s", line, id, fmt.Sprintf(format, args...))
	}
	a := &acquireRecord{line: line, id: id}
	if client, err := scalar(raw.Client, "client"); err == nil {
		a.client = client
	}
	if raw.Kind == nil {
		return nil, bad("no \"kind\"")
	}
	switch *raw.Kind {
	case "plain":
		a.kind = kindPlain
	case "shared":
		a.kind = kindShared
	case "permit":
		a.kind = kindPermit
	case "multi":
		a.kind = kindMulti
	case "leader":
		a.kind = kindLeader
	default:
		return nil, bad("unknown kind %q (plain, shared, permit, multi or leader)", *raw.Kind)
	}
	if raw.Resource == nil || *raw.Resource == "" {
		return nil, bad("no \"resource\"")
	}
	if a.kind == kindMulti {
		if len(raw.Resources) == 0 {
			return nil, bad("a multi acquire needs \"resources\"")
		}
		if raw.Resources[0] != *raw.Resource {
			return nil, bad("\"resource\" %q is not the first of \"resources\" (%q)", *raw.Resource, raw.Resources[0])
		}
		seen := make(map[string]bool, len(raw.Resources))
		for _, r := range raw.Resources {
			if r == "" {
				return nil, bad("an empty resource in \"resources\"")
			}
			if seen[r] {
				return nil, bad("resource %q twice in \"resources\"", r)
			}
			seen[r] = true
		}
		a.resources = raw.Resources
	} else {
		a.resources = []string{*raw.Resource}
	}
	if a.kind == kindPermit {
		if raw.Limit == nil || *raw.Limit < 2 {
			return nil, bad("a permit acquire needs \"limit\" of 2 or more")
		}
		a.limit = *raw.Limit
	}
	if raw.RequestID != nil {
		a.requestID = *raw.RequestID
	}
	if raw.InvokeUS == nil {
		return nil, bad("no \"invoke_us\"")
	}
	a.invokeUS = *raw.InvokeUS
	if raw.CompleteUS != nil && *raw.CompleteUS < a.invokeUS {
		return nil, bad("complete_us %d before invoke_us %d", *raw.CompleteUS, a.invokeUS)
	}
	if raw.Outcome == nil {
		return nil, bad("no \"outcome\"")
	}
	switch *raw.Outcome {
	case "failed":
		a.outcome = acquireFailed
		return a, nil
	case "unknown":
		a.outcome = acquireUnknown
		return a, nil
	case "granted":
		a.outcome = acquireGranted
	default:
		return nil, bad("unknown outcome %q (granted, failed or unknown)", *raw.Outcome)
	}
	if raw.CompleteUS == nil {
		return nil, bad("granted without \"complete_us\"")
	}
	a.completeUS = *raw.CompleteUS
	token, err := scalar(raw.Token, "token")
	if err != nil {
		return nil, bad("granted: %v", err)
	}
	a.token = token
	if raw.ValidityUS == nil {
		return nil, bad("granted without \"validity_us\"")
	}
	a.validityUS = *raw.ValidityUS
	if raw.Fence == nil {
		return nil, bad("granted without \"fence\"")
	}
	if a.kind == kindMulti {
		if len(raw.Fences) != len(a.resources) {
			return nil, bad("%d fences for %d resources", len(raw.Fences), len(a.resources))
		}
		if raw.Fences[0] != *raw.Fence {
			return nil, bad("\"fence\" %d is not the first of \"fences\" (%d)", *raw.Fence, raw.Fences[0])
		}
		a.fences = raw.Fences
	} else {
		a.fences = []uint64{*raw.Fence}
	}
	if a.kind == kindPermit {
		if raw.Permit == nil {
			return nil, bad("a granted permit without \"permit\"")
		}
		a.permit = *raw.Permit
	}
	return a, nil
}

func extendFrom(raw *rawRecord, line int, id string) (*extendRecord, error) {
	bad := func(format string, args ...any) error {
		return malformed("%d: extend %s: %s", line, id, fmt.Sprintf(format, args...))
	}
	grant, err := scalar(raw.Grant, "grant")
	if err != nil {
		return nil, bad("%v", err)
	}
	e := &extendRecord{line: line, id: id, grant: grant}
	if raw.InvokeUS == nil {
		return nil, bad("no \"invoke_us\"")
	}
	e.invokeUS = *raw.InvokeUS
	if raw.CompleteUS != nil && *raw.CompleteUS < e.invokeUS {
		return nil, bad("complete_us %d before invoke_us %d", *raw.CompleteUS, e.invokeUS)
	}
	if raw.Outcome == nil {
		return nil, bad("no \"outcome\"")
	}
	switch *raw.Outcome {
	case "ok":
		e.outcome = extendOK
	case "lost":
		e.outcome = extendLost
	case "failed":
		e.outcome = extendFailed
	case "unknown":
		e.outcome = extendUnknown
	default:
		return nil, bad("unknown outcome %q (ok, lost, failed or unknown)", *raw.Outcome)
	}
	if e.outcome == extendOK {
		if raw.CompleteUS == nil {
			return nil, bad("ok without \"complete_us\"")
		}
		if raw.ValidityUS == nil {
			return nil, bad("ok without \"validity_us\"")
		}
		e.completeUS = *raw.CompleteUS
		e.validityUS = *raw.ValidityUS
	}
	return e, nil
}

func releaseFrom(raw *rawRecord, line int, id string) (*releaseRecord, error) {
	bad := func(format string, args ...any) error {
		return malformed("%d: release %s: %s", line, id, fmt.Sprintf(format, args...))
	}
	grant, err := scalar(raw.Grant, "grant")
	if err != nil {
		return nil, bad("%v", err)
	}
	r := &releaseRecord{line: line, id: id, grant: grant}
	if raw.InvokeUS == nil {
		return nil, bad("no \"invoke_us\"")
	}
	r.invokeUS = *raw.InvokeUS
	if raw.CompleteUS != nil && *raw.CompleteUS < r.invokeUS {
		return nil, bad("complete_us %d before invoke_us %d", *raw.CompleteUS, r.invokeUS)
	}
	if raw.Outcome == nil {
		return nil, bad("no \"outcome\"")
	}
	switch *raw.Outcome {
	case "ok", "failed", "unknown":
	default:
		return nil, bad("unknown outcome %q (ok, failed or unknown)", *raw.Outcome)
	}
	return r, nil
}

// linkGrants checks that every extend and release names an acquire line.
func (h *history) linkGrants(ids map[string]int) error {
	acquires := make(map[string]bool, len(h.acquires))
	for _, a := range h.acquires {
		acquires[a.id] = true
	}
	check := func(line int, what, id, grant string) error {
		if acquires[grant] {
			return nil
		}
		if other, ok := ids[grant]; ok {
			return malformed("%d: %s %s: grant %q is line %d, not an acquire", line, what, id, grant, other)
		}
		return malformed("%d: %s %s: grant %q is no acquire of the history", line, what, id, grant)
	}
	for _, e := range h.extends {
		if err := check(e.line, "extend", e.id, e.grant); err != nil {
			return err
		}
	}
	for _, r := range h.releases {
		if err := check(r.line, "release", r.id, r.grant); err != nil {
			return err
		}
	}
	return nil
}
