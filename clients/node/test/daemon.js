// Test helper: five real valkey-server masters on free 127.0.0.1 ports and
// one real redlockd over them, configured as operators configure it
// (REDLOCKD__SECTION__KEY variables, and a TOML file for what variables
// cannot say, such as [[auth.clients]]). Waits until the daemon's health
// says SERVING; `stop()` tears everything down.
//
// Binaries: $REDLOCKD_VALKEY_BIN (after `source .venv/redlockd-env`), else
// valkey-server on PATH; $REDLOCKD_BIN, else <repo>/target/debug/redlockd.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..', '..');

/** Longest wait for a process to listen or the daemon to serve. */
const START_LIMIT_MS = 30_000;

const health = grpc.loadPackageDefinition(
  protoLoader.loadSync('health.proto', { includeDirs: [here], enums: String }),
).grpc.health.v1;

/** Every child started here, killed if the test process exits early. */
const children = new Set();
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export async function freePort() {
  const server = net.createServer();
  await new Promise((resolve, reject) => server.listen(0, '127.0.0.1', resolve).on('error', reject));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function start(binary, args, env, log) {
  const out = fs.openSync(log, 'a');
  const child = spawn(binary, args, { env, stdio: ['ignore', out, out] });
  fs.closeSync(out);
  children.add(child);
  child.exited = new Promise((resolve) => child.on('exit', resolve));
  child.on('error', (error) => fs.appendFileSync(log, `spawn failed: ${error.message}\n`));
  return child;
}

async function kill(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGKILL');
  await child.exited;
  children.delete(child);
}

function tail(log) {
  try {
    return fs.readFileSync(log, 'utf8').split('\n').slice(-20).join('\n');
  } catch (error) {
    return `(no log: ${error.message})`;
  }
}

/** Polls until something accepts connections on 127.0.0.1:`port`. */
async function listening(port, child, log) {
  const limit = Date.now() + START_LIMIT_MS;
  while (Date.now() < limit) {
    if (child.exitCode !== null) throw new Error(`exited (${child.exitCode}) before listening on ${port}:\n${tail(log)}`);
    const ok = await new Promise((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (ok) return;
    await sleep(20);
  }
  throw new Error(`nothing listened on ${port} within ${START_LIMIT_MS} ms:\n${tail(log)}`);
}

/** One valkey-server master with no persistence. */
class Master {
  constructor(binary, dir, port) {
    this.port = port;
    this.url = `redis://127.0.0.1:${port}`;
    this.log = path.join(dir, `master-${port}.log`);
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--protected-mode', 'yes', '--daemonize', 'no', '--loglevel', 'warning', '--dir', dir];
    this.child = start(binary, args, process.env, this.log);
  }

  /** Sends one command (RESP over a fresh connection); resolves with the first reply line. */
  command(...args) {
    const request = `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
    return new Promise((resolve, reject) => {
      const socket = net.connect(this.port, '127.0.0.1', () => socket.write(request));
      socket.setEncoding('utf8');
      socket.once('data', (reply) => {
        socket.destroy();
        resolve(reply.split('\r\n')[0]);
      });
      socket.on('error', reject);
    });
  }

  /** Kills the master (SIGKILL): its keys are gone with it. */
  stop() {
    return kill(this.child);
  }
}

/**
 * One master on a free port. A port that was free a moment ago can be
 * taken by another test file running in parallel before the master binds
 * it: then it is started again on another port (a few times at most).
 */
async function startMaster(valkey, dir) {
  for (let attempt = 1; ; attempt += 1) {
    const master = new Master(valkey, dir, await freePort());
    try {
      await listening(master.port, master.child, master.log);
      return master;
    } catch (error) {
      await master.stop();
      if (attempt >= 5 || !/Address already in use/.test(error.message)) throw error;
    }
  }
}

/**
 * Starts five masters and a daemon. `settings`: extra configuration keys
 * as in config/redlockd.toml (`'server.keepalive_interval': '1s'`);
 * `toml`: text of a configuration file; `credentials`: the channel
 * credentials the readiness probe connects with (TLS).
 */
export async function startDaemon({ settings = {}, toml = null, credentials = null } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redlockd-node-client-'));
  const valkey = process.env.REDLOCKD_VALKEY_BIN || 'valkey-server';
  const masters = [];
  try {
    for (let i = 0; i < 5; i += 1) masters.push(await startMaster(valkey, dir));
  } catch (error) {
    await Promise.all(masters.map((m) => m.stop()));
    throw new Error(`masters (${valkey}; source .venv/redlockd-env first): ${error.message}`);
  }
  const port = await freePort();
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('REDLOCKD__')));
  const all = {
    'redlock.nodes': masters.map((m) => m.url).join(','),
    'redlock.node_timeout': '50ms',
    'server.listen': `127.0.0.1:${port}`,
    'metrics.enabled': 'false',
    // A stop drains open sessions for shutdown_grace (20 s by default).
    'server.shutdown_grace': '1s',
    ...settings,
  };
  for (const [key, value] of Object.entries(all)) {
    env[`REDLOCKD__${key.replaceAll('.', '__').toUpperCase()}`] = String(value);
  }
  env.RUST_LOG ??= 'warn';
  const args = [];
  if (toml !== null) {
    const file = path.join(dir, 'redlockd.toml');
    fs.writeFileSync(file, toml);
    args.push('--config', file);
  }
  const binary = process.env.REDLOCKD_BIN || path.join(repo, 'target', 'debug', 'redlockd');
  const log = path.join(dir, 'redlockd.log');
  const daemon = start(binary, args, env, log);
  const handle = {
    address: `127.0.0.1:${port}`,
    masters,
    dir,
    log: () => tail(log),
    /** Sends `signal` (SIGTERM, SIGSTOP, SIGCONT, ...) to the daemon. */
    signal: (signal) => daemon.kill(signal),
    /** Resolves when the daemon process has exited. */
    exited: daemon.exited,
    async stop() {
      daemon.kill('SIGCONT');
      await kill(daemon);
      await Promise.all(masters.map((m) => m.stop()));
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await serving(handle.address, credentials ?? grpc.credentials.createInsecure(), daemon, log);
  } catch (error) {
    await handle.stop();
    throw error;
  }
  return handle;
}

/** Polls the health service until the lock service is SERVING. */
async function serving(address, credentials, daemon, log) {
  const client = new health.Health(address, credentials);
  const limit = Date.now() + START_LIMIT_MS;
  let last = 'no answer';
  try {
    while (Date.now() < limit) {
      if (daemon.exitCode !== null) throw new Error(`redlockd exited (${daemon.exitCode}):\n${tail(log)}`);
      const answer = await new Promise((resolve) =>
        client.Check({ service: 'redlock.v1.LockService' }, { deadline: Date.now() + 1000 }, (error, reply) =>
          resolve(error ? `${error.code} ${error.details}` : reply.status),
        ),
      );
      if (answer === 'SERVING') return;
      last = answer;
      await sleep(20);
    }
    throw new Error(`redlockd at ${address} not SERVING within ${START_LIMIT_MS} ms (last: ${last}):\n${tail(log)}`);
  } finally {
    client.close();
  }
}
