package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// exitOn runs the command on the given file content.
func exitOn(t *testing.T, content string, extra ...string) (int, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "history.jsonl")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return runOn(t, path, extra...)
}

const okLine = `{"type":"acquire","id":1,"kind":"plain","resource":"r","invoke_us":0,"complete_us":10,"outcome":"granted","token":"a","fence":1,"validity_us":100}`

// A malformed history is exit 2, naming the line and what is wrong.
func TestMalformedHistoriesExitTwo(t *testing.T) {
	for _, c := range []struct{ name, content, want string }{
		{"empty file", "\n\n", "no records"},
		{"not JSON", okLine + "\n{\"type\":", "2: not a JSON object"},
		{"no type", `{"id":1}`, `1: no "type"`},
		{"unknown type", `{"type":"validate","id":1}`, `unknown type "validate"`},
		{"no id", `{"type":"release","grant":1,"invoke_us":5,"outcome":"ok"}`, `no "id"`},
		{"duplicate id", okLine + "\n" + okLine, `2: id "1" already used on line 1`},
		{"unknown kind", strings.Replace(okLine, `"plain"`, `"exclusive"`, 1), `unknown kind "exclusive"`},
		{"granted without fence", strings.Replace(okLine, `"fence":1,`, "", 1), `granted without "fence"`},
		{"granted without complete_us", strings.Replace(okLine, `"complete_us":10,`, "", 1), `granted without "complete_us"`},
		{"granted without token", strings.Replace(okLine, `"token":"a",`, "", 1), `no "token"`},
		{"answer before the send", strings.Replace(okLine, `"invoke_us":0`, `"invoke_us":20`, 1), "complete_us 10 before invoke_us 20"},
		{"fence not a number", strings.Replace(okLine, `"fence":1`, `"fence":"1"`, 1), "not a JSON object"},
		{"permit without limit", strings.Replace(okLine, `"plain"`, `"permit"`, 1), `"limit" of 2 or more`},
		{"granted permit without its index", strings.Replace(okLine, `"plain"`, `"permit","limit":2`, 1), `without "permit"`},
		{"multi with too few fences", strings.Replace(okLine, `"plain"`, `"multi","resources":["r","s"],"fences":[1]`, 1), "1 fences for 2 resources"},
		{"multi whose resource is not the first", strings.Replace(okLine, `"plain"`, `"multi","resources":["s","r"],"fences":[1,2]`, 1), `is not the first of "resources"`},
		{"extend of no acquire", okLine + "\n" + `{"type":"extend","id":2,"grant":9,"invoke_us":20,"complete_us":30,"outcome":"ok","validity_us":100}`, `grant "9" is no acquire`},
		{"release of a release", okLine + "\n" + `{"type":"release","id":2,"grant":1,"invoke_us":20,"outcome":"ok"}` + "\n" + `{"type":"release","id":3,"grant":2,"invoke_us":20,"outcome":"ok"}`, "not an acquire"},
		{"ok extend without validity", okLine + "\n" + `{"type":"extend","id":2,"grant":1,"invoke_us":20,"complete_us":30,"outcome":"ok"}`, `ok without "validity_us"`},
		{"unknown release outcome", okLine + "\n" + `{"type":"release","id":2,"grant":1,"invoke_us":20,"outcome":"done"}`, `unknown outcome "done"`},
		{"one token, two kinds", okLine + "\n" + strings.Replace(strings.Replace(okLine, `"id":1`, `"id":2`, 1), `"plain"`, `"shared"`, 1), "one token is one lock"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out := exitOn(t, c.content)
			if code != exitUndecided || !strings.Contains(out, c.want) {
				t.Fatalf("want exit 2 with %q, got exit %d:\n%s", c.want, code, out)
			}
		})
	}
}

// ids, grants, clients and tokens may be strings or integers.
func TestIDsAreStringsOrIntegers(t *testing.T) {
	code, out := exitOn(t, `{"type":"acquire","id":"a-1","client":"c","kind":"plain","resource":"r","invoke_us":0,"complete_us":10,"outcome":"granted","token":77,"fence":1,"validity_us":100}
{"type":"release","id":2,"grant":"a-1","invoke_us":50,"outcome":"unknown"}
{"type":"acquire","id":3,"kind":"plain","resource":"r","invoke_us":40,"complete_us":60,"outcome":"granted","token":"x","fence":2,"validity_us":100}
`)
	if code != exitAccepted {
		t.Fatalf("want exit 0, got %d:\n%s", code, out)
	}
}

// A check not finished by its deadline is exit 2 (undecided), not a pass.
func TestUndecidedIsNoPass(t *testing.T) {
	h, err := readHistoryFile("testdata/clean.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lh, err := buildLocks(h)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	report := checkLocks(lh, time.Now().Add(-time.Second))
	if code := conclude(report, "clean.jsonl", time.Second, "", &out, &out); code != exitUndecided || !strings.Contains(out.String(), "undecided") {
		t.Fatalf("want exit 2 (undecided), got %d:\n%s", code, out.String())
	}
}

// Usage errors are exit 2.
func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{{}, {"--history"}, {"--history", "x", "extra"}, {"--history", "x", "--timeout", "0s"}, {"--history", "/nonexistent/file"}} {
		var out bytes.Buffer
		if code := run(args, &out, &out); code != exitUndecided {
			t.Errorf("%q: want exit 2, got %d:\n%s", args, code, out.String())
		}
	}
}
