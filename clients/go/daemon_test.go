package redlockd_test

// Test helper: five real valkey-server masters on free 127.0.0.1 ports and
// one real redlockd over them, from the test kit's launcher,
// redlockd-cluster (its protocol: crates/redlockd-testkit/src/bin/
// redlockd-cluster/main.rs): it starts them, waits until the daemon's
// health says SERVING, prints one JSON line, then answers commands on its
// stdin; closing its stdin stops everything.
//
// Launcher: $REDLOCKD_CLUSTER_BIN, else <repo>/target/debug/redlockd-cluster
// (cargo build --workspace --bins). It finds valkey-server
// ($REDLOCKD_VALKEY_BIN, after `source .venv/redlockd-env`) and redlockd
// ($REDLOCKD_BIN, else the workspace's) itself.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"
)

// lineLimit bounds the wait for one line of the launcher, whose own waits
// are bounded (60 s for a daemon to serve).
const lineLimit = 90 * time.Second

// answer is one JSON line of the launcher.
type answer struct {
	OK      bool   `json:"ok"`
	Error   string `json:"error"`
	Reply   string `json:"reply"`
	Addr    string `json:"addr"`
	Masters []struct {
		Port int `json:"port"`
	} `json:"masters"`
	Daemon struct {
		Addr string `json:"addr"`
	} `json:"daemon"`
}

// launcher is a running redlockd-cluster: one command at a time.
type launcher struct {
	mu    sync.Mutex
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	once  sync.Once
}

// repoRoot is the repository's root (this package is clients/go).
func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

// startLauncher starts redlockd-cluster with args and reads its start-up line.
func startLauncher(args []string) (*launcher, answer, error) {
	binary := os.Getenv("REDLOCKD_CLUSTER_BIN")
	if binary == "" {
		binary = filepath.Join(repoRoot(), "target", "debug", "redlockd-cluster")
	}
	cmd := exec.Command(binary, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, answer{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, answer{}, err
	}
	if err := cmd.Start(); err != nil {
		return nil, answer{}, fmt.Errorf("start %s (cargo build --workspace --bins): %w", binary, err)
	}
	l := &launcher{cmd: cmd, stdin: stdin, lines: make(chan string)}
	go func() {
		scanner := bufio.NewScanner(stdout)
		scanner.Buffer(make([]byte, 64*1024), 1024*1024)
		for scanner.Scan() {
			l.lines <- scanner.Text()
		}
		close(l.lines)
	}()
	first, err := l.next()
	if err != nil {
		l.close()
		return nil, answer{}, err
	}
	return l, first, nil
}

// next reads one answer; an error unless it says ok.
func (l *launcher) next() (answer, error) {
	select {
	case line, open := <-l.lines:
		if !open {
			return answer{}, fmt.Errorf("redlockd-cluster ended without answering (its stderr says why)")
		}
		var a answer
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			return answer{}, fmt.Errorf("redlockd-cluster said %q: %w", line, err)
		}
		if !a.OK {
			return a, fmt.Errorf("redlockd-cluster: %s", a.Error)
		}
		return a, nil
	case <-time.After(lineLimit):
		return answer{}, fmt.Errorf("redlockd-cluster: no answer within %s", lineLimit)
	}
}

// ask sends one command (a JSON array of words) and returns its answer.
func (l *launcher) ask(words ...string) (answer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	line, err := json.Marshal(words)
	if err != nil {
		return answer{}, err
	}
	if _, err := l.stdin.Write(append(line, '\n')); err != nil {
		return answer{}, err
	}
	return l.next()
}

// close ends the launcher's stdin, which stops every process it started,
// and waits for it (killing it past a bound).
func (l *launcher) close() {
	l.once.Do(func() {
		_ = l.stdin.Close()
		done := make(chan struct{})
		go func() {
			_ = l.cmd.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(lineLimit):
			_ = l.cmd.Process.Kill()
			<-done
		}
	})
}

// master is one of the launcher's masters.
type master struct {
	launcher *launcher
	index    int
	port     int
}

// command sends one command to the master over RESP and returns the first
// line of the reply.
func (m *master) command(args ...string) (string, error) {
	a, err := m.launcher.ask(append([]string{"master", strconv.Itoa(m.index)}, args...)...)
	return a.Reply, err
}

// kill stops the master with SIGKILL: its keys are gone with it.
func (m *master) kill() {
	_, _ = m.launcher.ask("stop-master", strconv.Itoa(m.index))
}

// daemon is a running redlockd over its own five masters.
type daemon struct {
	addr     string
	masters  []*master
	launcher *launcher
}

// daemonSpec is what a test asks of its daemon.
type daemonSpec struct {
	// settings are extra configuration keys as in config/redlockd.toml
	// ("server.tls.cert": path).
	settings map[string]string
	// toml is the text of a configuration file, if any.
	toml string
	// probe are the launcher's --probe-* options: the TLS its readiness
	// probe connects with.
	probe []string
}

// startDaemon starts five masters and a daemon and waits until it serves.
func startDaemon(spec daemonSpec) (*daemon, error) {
	// Wider than the daemon's default 50ms: CI's two cores are shared.
	args := []string{"--set", "redlock.node_timeout=250ms"}
	keys := make([]string, 0, len(spec.settings))
	for k := range spec.settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--set", k+"="+spec.settings[k])
	}
	if spec.toml != "" {
		args = append(args, "--toml", spec.toml)
	}
	l, started, err := startLauncher(append(args, spec.probe...))
	if err != nil {
		return nil, err
	}
	d := &daemon{addr: started.Daemon.Addr, launcher: l}
	for i, m := range started.Masters {
		d.masters = append(d.masters, &master{launcher: l, index: i, port: m.Port})
	}
	return d, nil
}

// signal sends the daemon a signal by name (TERM, STOP, CONT).
func (d *daemon) signal(name string) error {
	_, err := d.launcher.ask("signal", "0", name)
	return err
}

// slowAnswers is the address of a proxy to the daemon (the launcher's)
// that passes the client's bytes at once and delivers the daemon's delay
// after it sent them, in order: the daemon grants and answers in time,
// and its answer arrives after the client's deadline fired.
func (d *daemon) slowAnswers(t *testing.T, delay time.Duration) string {
	t.Helper()
	a, err := d.launcher.ask("slow-answers", "0", strconv.FormatInt(delay.Milliseconds(), 10))
	if err != nil {
		t.Fatal(err)
	}
	return a.Addr
}

// stop kills the daemon and its masters and removes their directory.
func (d *daemon) stop() {
	d.launcher.close()
}

// newDaemon starts a daemon for one test and stops it when the test ends.
func newDaemon(t *testing.T, spec daemonSpec) *daemon {
	t.Helper()
	d, err := startDaemon(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	return d
}

// shared is the daemon of the tests that need nothing special (TestMain).
var shared *daemon

func TestMain(m *testing.M) {
	d, err := startDaemon(daemonSpec{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the shared daemon:", err)
		os.Exit(1)
	}
	shared = d
	code := m.Run()
	d.stop()
	os.Exit(code)
}
