// What the client costs over the raw generated stub, against one real
// daemon (test/daemon.js starts it with five masters): acquire+release
// cycles at concurrency 1 (p50, p99 of a cycle) and at concurrency 64
// (cycles per second), each through the client and through a raw
// @grpc/grpc-js stub on the same contract. Prints figures; asserts nothing.
//
// Usage (from clients/node): node bench/bench.js [SECONDS_PER_RUN]
// REDLOCKD_BIN picks the daemon (default target/debug/redlockd: a debug
// build; use a release build for figures worth quoting).

import path from 'node:path';
import { fileURLToPath } from 'node:url';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
import { Client } from '../src/index.js';
import { startDaemon } from '../test/daemon.js';

const seconds = Number(process.argv[2] ?? 3);
const here = path.dirname(fileURLToPath(import.meta.url));
const definition = protoLoader.loadSync('redlock/v1/lock.proto', {
  includeDirs: [path.join(here, '..', 'proto')],
  keepCase: true,
  longs: String,
  defaults: true,
  oneofs: true,
});
const { LockService } = grpc.loadPackageDefinition(definition).redlock.v1;

const unary = (stub, method, request) =>
  new Promise((resolve, reject) =>
    stub[method](request, { deadline: Date.now() + 10_000 }, (e, r) => (e ? reject(e) : resolve(r))),
  );

/** One acquire+release cycle on `resource`, by each way of calling. */
function cycles(address) {
  const client = new Client(address);
  const stub = new LockService(address, grpc.credentials.createInsecure());
  return {
    client: async (resource) => client.release(await client.acquire(resource, { ttlMs: 10_000 })),
    raw: async (resource) => {
      const { lock } = await unary(stub, 'Acquire', { resource, ttl: { seconds: 10, nanos: 0 } });
      await unary(stub, 'Release', { resource, token: lock.token });
    },
    close: () => {
      client.close();
      stub.close();
    },
  };
}

async function latency(cycle, name) {
  const times = [];
  const end = performance.now() + seconds * 1000;
  while (performance.now() < end) {
    const started = performance.now();
    await cycle(`bench/${name}/c1`);
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  const at = (q) => times[Math.min(times.length - 1, Math.floor(q * times.length))].toFixed(2);
  return `p50 ${at(0.5)} ms, p99 ${at(0.99)} ms (${times.length} cycles)`;
}

async function throughput(cycle, name, concurrency) {
  let done = 0;
  let failed = 0;
  const end = performance.now() + seconds * 1000;
  const worker = async (i) => {
    while (performance.now() < end) {
      try {
        await cycle(`bench/${name}/c${concurrency}/${i}`);
        done += 1;
      } catch {
        failed += 1; // counted, not hidden: an overloaded daemon answers UNAVAILABLE
      }
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, (_, i) => worker(i)));
  return `${Math.round(done / ((performance.now() - started) / 1000))} cycles/s (${failed} failed)`;
}

// A generous node_timeout: the figures are the client's cost, not how a
// starved machine's masters keep up.
const daemon = await startDaemon({ settings: { 'redlock.node_timeout': '1s' } });
const ways = cycles(daemon.address);
try {
  for (const name of ['raw', 'client', 'raw', 'client']) await ways[name]('bench/warm-up'); // connect, warm up
  for (const name of ['raw', 'client']) console.log(`C=1  ${name.padEnd(6)} ${await latency(ways[name], name)}`);
  for (const name of ['raw', 'client']) console.log(`C=64 ${name.padEnd(6)} ${await throughput(ways[name], name, 64)}`);
} finally {
  ways.close();
  await daemon.stop();
}
