// Node's row of scripts/bench-clients.sh: what redlockd-client costs beside
// a raw @grpc/grpc-js stub on the same contract, against a running daemon.
// Prints one JSON line per way; asserts nothing. Method: see bench.py.
//
//   node bench.mjs ADDRESS SECONDS ROUNDS

import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { Client } from '../../node/src/index.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const nodePkg = path.join(here, '..', '..', 'node');
// The client's own copies of grpc-js and proto-loader (clients/node/node_modules).
const require = createRequire(path.join(nodePkg, 'package.json'));
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const [address, secondsArg, roundsArg] = process.argv.slice(2);
const seconds = Number(secondsArg);
const rounds = Number(roundsArg);
const definition = protoLoader.loadSync('redlock/v1/lock.proto', {
  includeDirs: [path.join(nodePkg, 'proto')],
  keepCase: true,
  longs: String,
  defaults: true,
  oneofs: true,
});
const { LockService } = grpc.loadPackageDefinition(definition).redlock.v1;
const stub = new LockService(address, grpc.credentials.createInsecure());
const client = new Client(address);

const unary = (method, request) =>
  new Promise((resolve, reject) =>
    stub[method](request, { deadline: Date.now() + 10_000 }, (e, r) => (e ? reject(e) : resolve(r))),
  );
const ways = {
  raw: async (resource) => {
    const { lock } = await unary('Acquire', { resource, ttl: { seconds: 10, nanos: 0 } });
    await unary('Release', { resource, token: lock.token });
  },
  client: async (resource) => client.release(await client.acquire(resource, { ttlMs: 10_000 })),
};

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function c1(cycle, resource) {
  const times = [];
  const end = performance.now() + seconds * 1000;
  while (performance.now() < end) {
    const started = performance.now();
    await cycle(resource);
    times.push(performance.now() - started);
  }
  return median(times);
}

async function c64(cycle, prefix) {
  let done = 0;
  let failed = 0;
  const end = performance.now() + seconds * 1000;
  const worker = async (i) => {
    while (performance.now() < end) {
      try {
        await cycle(`${prefix}/${i}`);
        done += 1;
      } catch {
        failed += 1; // counted, not hidden
      }
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: 64 }, (_, i) => worker(i)));
  return { rate: done / ((performance.now() - started) / 1000), failed };
}

try {
  for (const [name, cycle] of Object.entries(ways)) {
    for (let i = 0; i < 50; i += 1) await cycle(`bench/node/warm/${name}`);
  }
  const p50 = { raw: [], client: [] };
  const rate = { raw: [], client: [] };
  const failed = { raw: 0, client: 0 };
  for (let r = 0; r < rounds; r += 1) {
    for (const [name, cycle] of Object.entries(ways)) p50[name].push(await c1(cycle, `bench/node/c1/${name}`));
  }
  for (let r = 0; r < rounds; r += 1) {
    for (const [name, cycle] of Object.entries(ways)) {
      const result = await c64(cycle, `bench/node/c64/${name}`);
      rate[name].push(result.rate);
      failed[name] += result.failed;
    }
  }
  for (const name of Object.keys(ways)) {
    console.log(JSON.stringify({
      lang: 'node', way: name, c1_p50_ms: median(p50[name]), c64_cycles_per_s: median(rate[name]),
      c64_failed: failed[name],
    }));
  }
} finally {
  client.close();
  stub.close();
}
