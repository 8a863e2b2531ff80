package redlockd_test

// Test helper: five real valkey-server masters on free 127.0.0.1 ports and
// one real redlockd over them, configured as operators configure it
// (REDLOCKD__SECTION__KEY variables, and a TOML file for what variables
// cannot say, such as [[auth.clients]]). Waits until the daemon's health
// says SERVING.
//
// Binaries: $REDLOCKD_VALKEY_BIN (after `source .venv/redlockd-env`), else
// valkey-server on PATH; $REDLOCKD_BIN, else <repo>/target/debug/redlockd.

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// startLimit bounds the wait for a process to listen or the daemon to serve.
const startLimit = 30 * time.Second

// freePort is a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// process is a child process with its output in a log file.
type process struct {
	cmd  *exec.Cmd
	log  string
	once sync.Once
	exit chan struct{}
}

func start(binary string, args, env []string, log string) (*process, error) {
	out, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command(binary, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	p := &process{cmd: cmd, log: log, exit: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exit)
	}()
	return p, nil
}

// exited says whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.exit:
		return true
	default:
		return false
	}
}

// kill stops the process with SIGKILL and waits for it.
func (p *process) kill() {
	p.once.Do(func() {
		_ = p.cmd.Process.Kill()
		<-p.exit
	})
}

// tail is the end of the process's log, for failure messages.
func (p *process) tail() string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(string(data), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// listening polls until something accepts connections on port.
func (p *process) listening(port int) error {
	limit := time.Now().Add(startLimit)
	for time.Now().Before(limit) {
		if p.exited() {
			return fmt.Errorf("exited before listening on %d:\n%s", port, p.tail())
		}
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("nothing listened on %d within %s:\n%s", port, startLimit, p.tail())
}

// master is one valkey-server with no persistence.
type master struct {
	*process
	port int
}

// command sends one command over RESP on a fresh connection and returns
// the first line of the reply.
func (m *master) command(args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", m.port), 5*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	var req bytes.Buffer
	fmt.Fprintf(&req, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write(req.Bytes()); err != nil {
		return "", err
	}
	buf := make([]byte, 512)
	n, err := conn.Read(buf)
	if err != nil {
		return "", err
	}
	return strings.SplitN(string(buf[:n]), "\r\n", 2)[0], nil
}

// daemon is a running redlockd over its own five masters.
type daemon struct {
	addr    string
	dir     string
	masters []*master
	proc    *process
}

// daemonSpec is what a test asks of its daemon.
type daemonSpec struct {
	// settings are extra configuration keys as in config/redlockd.toml
	// ("server.tls.cert": path).
	settings map[string]string
	// toml is the text of a configuration file, if any.
	toml string
	// probeTLS is the TLS configuration the readiness probe connects with.
	probeTLS *tls.Config
}

// repoRoot is the repository's root (this package is clients/go).
func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

// startDaemon starts five masters and a daemon and waits until it serves.
func startDaemon(spec daemonSpec) (d *daemon, err error) {
	dir, err := os.MkdirTemp("", "redlockd-go-client-")
	if err != nil {
		return nil, err
	}
	d = &daemon{dir: dir}
	defer func() {
		if err != nil {
			d.stop()
		}
	}()
	valkey := os.Getenv("REDLOCKD_VALKEY_BIN")
	if valkey == "" {
		valkey = "valkey-server"
	}
	urls := make([]string, 0, 5)
	for range 5 {
		port, err := freePort()
		if err != nil {
			return d, err
		}
		args := []string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--protected-mode", "yes", "--daemonize", "no", "--loglevel", "warning", "--dir", dir}
		p, err := start(valkey, args, os.Environ(), filepath.Join(dir, fmt.Sprintf("master-%d.log", port)))
		if err != nil {
			return d, fmt.Errorf("masters (%s; source .venv/redlockd-env first): %w", valkey, err)
		}
		d.masters = append(d.masters, &master{process: p, port: port})
		urls = append(urls, fmt.Sprintf("redis://127.0.0.1:%d", port))
	}
	for _, m := range d.masters {
		if err := m.listening(m.port); err != nil {
			return d, fmt.Errorf("master: %w", err)
		}
	}
	port, err := freePort()
	if err != nil {
		return d, err
	}
	d.addr = fmt.Sprintf("127.0.0.1:%d", port)
	settings := map[string]string{
		"redlock.nodes": strings.Join(urls, ","),
		// Wider than the Node harness's 50ms: CI's two cores are shared.
		"redlock.node_timeout": "250ms",
		"server.listen":        d.addr,
		"metrics.enabled":      "false",
		// A stop drains open sessions for shutdown_grace (20 s by default).
		"server.shutdown_grace": "1s",
	}
	for k, v := range spec.settings {
		settings[k] = v
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REDLOCKD__") {
			env = append(env, kv)
		}
	}
	for k, v := range settings {
		env = append(env, "REDLOCKD__"+strings.ToUpper(strings.ReplaceAll(k, ".", "__"))+"="+v)
	}
	if os.Getenv("RUST_LOG") == "" {
		env = append(env, "RUST_LOG=warn")
	}
	var args []string
	if spec.toml != "" {
		file := filepath.Join(dir, "redlockd.toml")
		if err := os.WriteFile(file, []byte(spec.toml), 0o600); err != nil {
			return d, err
		}
		args = append(args, "--config", file)
	}
	binary := os.Getenv("REDLOCKD_BIN")
	if binary == "" {
		binary = filepath.Join(repoRoot(), "target", "debug", "redlockd")
	}
	d.proc, err = start(binary, args, env, filepath.Join(dir, "redlockd.log"))
	if err != nil {
		return d, err
	}
	return d, d.serving(spec.probeTLS)
}

// serving polls the health service until the lock service is SERVING.
func (d *daemon) serving(probeTLS *tls.Config) error {
	creds := insecure.NewCredentials()
	if probeTLS != nil {
		creds = credentials.NewTLS(probeTLS)
	}
	conn, err := grpc.NewClient(d.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	limit := time.Now().Add(startLimit)
	last := "no answer"
	for time.Now().Before(limit) {
		if d.proc.exited() {
			return fmt.Errorf("redlockd exited:\n%s", d.proc.tail())
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "redlock.v1.LockService"})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = resp.GetStatus().String()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("redlockd at %s not SERVING within %s (last: %s):\n%s", d.addr, startLimit, last, d.proc.tail())
}

// stop kills the daemon and its masters and removes their directory.
func (d *daemon) stop() {
	if d.proc != nil {
		_ = d.proc.cmd.Process.Signal(syscall.SIGCONT)
		d.proc.kill()
	}
	for _, m := range d.masters {
		m.kill()
	}
	_ = os.RemoveAll(d.dir)
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
