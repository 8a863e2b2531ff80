// Test helper: five real valkey-server masters on free 127.0.0.1 ports and
// one real redlockd over them, from the test kit's launcher,
// redlockd-cluster (its protocol: crates/redlockd-testkit/src/bin/
// redlockd-cluster/main.rs): it starts them, waits until the daemon's
// health says SERVING, prints one JSON line, then answers commands on its
// stdin; `stop()` closes its stdin, which stops everything.
//
// Launcher: $REDLOCKD_CLUSTER_BIN, else <repo>/target/debug/redlockd-cluster
// (cargo build --workspace --bins). It finds valkey-server
// ($REDLOCKD_VALKEY_BIN, after `source .venv/redlockd-env`) and redlockd
// ($REDLOCKD_BIN, else the workspace's) itself.

import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..', '..');

/** Longest wait for one line of the launcher, whose own waits are bounded (60 s for a daemon to serve). */
const LINE_LIMIT_MS = 90_000;

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export async function freePort() {
  const server = net.createServer();
  await new Promise((resolve, reject) => server.listen(0, '127.0.0.1', resolve).on('error', reject));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A running redlockd-cluster: one command at a time, answered in order. */
class Launcher {
  constructor(args) {
    const binary = process.env.REDLOCKD_CLUSTER_BIN || path.join(repo, 'target', 'debug', 'redlockd-cluster');
    this.child = spawn(binary, args, { stdio: ['pipe', 'pipe', 'inherit'] });
    this.exited = new Promise((resolve) => this.child.on('close', resolve));
    this.lines = [];
    this.waiting = [];
    this.ended = false;
    this.chain = Promise.resolve();
    const end = () => {
      this.ended = true;
      for (const take of this.waiting.splice(0)) take(null);
    };
    this.child.on('error', (error) => {
      this.failure = `cannot start ${binary} (cargo build --workspace --bins): ${error.message}`;
      end();
    });
    readline.createInterface({ input: this.child.stdout })
      .on('line', (line) => (this.waiting.length ? this.waiting.shift()(line) : this.lines.push(line)))
      .on('close', end);
  }

  /** The next answer; rejects unless it says ok. */
  next() {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`redlockd-cluster: no answer within ${LINE_LIMIT_MS} ms`)), LINE_LIMIT_MS);
      const take = (line) => {
        clearTimeout(timer);
        if (line === null) {
          reject(new Error(this.failure ?? 'redlockd-cluster ended without answering (its stderr says why)'));
          return;
        }
        const answer = JSON.parse(line);
        if (answer.ok) resolve(answer);
        else reject(new Error(`redlockd-cluster: ${answer.error}`));
      };
      if (this.lines.length) take(this.lines.shift());
      else if (this.ended) take(null);
      else this.waiting.push(take);
    });
  }

  /** Sends one command (a JSON array of words); resolves with its answer. */
  ask(...words) {
    const answer = this.chain.then(() => {
      this.child.stdin.write(`${JSON.stringify(words)}\n`);
      return this.next();
    });
    this.chain = answer.catch(() => {});
    return answer;
  }

  /** Closes stdin (the launcher stops everything) and waits for it, killing it past the bound. */
  async close() {
    this.child.stdin.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), LINE_LIMIT_MS);
    await this.exited;
    clearTimeout(timer);
  }
}

/**
 * Starts five masters and a daemon. `settings`: extra configuration keys
 * as in config/redlockd.toml (`'server.keepalive_interval': '1s'`);
 * `toml`: text of a configuration file; `probe`: the launcher's
 * `--probe-*` options, the TLS its readiness probe connects with.
 */
export async function startDaemon({ settings = {}, toml = null, probe = [] } = {}) {
  const args = Object.entries(settings).flatMap(([key, value]) => ['--set', `${key}=${value}`]);
  if (toml !== null) args.push('--toml', toml);
  const launcher = new Launcher([...args, ...probe]);
  let started;
  try {
    started = await launcher.next();
  } catch (error) {
    await launcher.close();
    throw error;
  }
  return {
    address: started.daemon.addr,
    masters: started.masters.map(({ port }, index) => ({
      port,
      /** Sends one command over RESP; resolves with the first reply line. */
      command: async (...command) => (await launcher.ask('master', String(index), ...command)).reply,
      /** Kills the master (SIGKILL): its keys are gone with it. */
      stop: () => launcher.ask('stop-master', String(index)),
    })),
    /**
     * Resolves with the address of a proxy to the daemon (the launcher's)
     * that passes the client's bytes at once and delivers the daemon's
     * `delayMs` after it sent them, in order: the daemon grants and answers
     * in time, and its answer arrives after the client's deadline fired.
     */
    slowAnswers: async (delayMs) => (await launcher.ask('slow-answers', '0', String(delayMs))).addr,
    /** Sends `signal` (SIGTERM, SIGSTOP, SIGCONT, ...) to the daemon. */
    signal: (signal) => launcher.ask('signal', '0', signal),
    /** Resolves when the daemon process has exited. */
    get exited() {
      return launcher.ask('wait-daemon', '0');
    },
    /** Stops the daemon and its masters and removes their directory. */
    stop: () => launcher.close(),
  };
}
