// Bearer tokens and TLS against a real daemon: the token goes as
// `authorization: Bearer ...` on every call and session; TLS with a private
// CA made here with the openssl CLI; mutual TLS with a client certificate.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  Client,
  InvalidArgumentError,
  PermissionDeniedError,
  RedlockdError,
  UnauthenticatedError,
  UnavailableError,
} from '../src/index.js';
import { startDaemon } from './daemon.js';

const ORDERS_TOKEN = 'orders-7f3a9c2e4b6d8f0a1c3e5b7d9f2a4c6e';

/** Acquires and releases `resource` through `client`: proof that calls get through. */
async function roundTrip(client, resource) {
  const lock = await client.acquire(resource, { ttlMs: 5000 });
  assert.equal(await client.release(lock), true);
  const fence = await client.using(resource, { ttlMs: 5000 }, async (signal, held) => held.fence);
  assert.ok(fence > lock.fence);
}

describe('bearer tokens', () => {
  let daemon;
  before(async () => {
    const sha = createHash('sha256').update(ORDERS_TOKEN).digest('hex');
    daemon = await startDaemon({
      toml: `[[auth.clients]]\nname = "orders"\ntoken_sha256 = "${sha}"\nnamespaces = ["orders/"]\n`,
    });
  });
  after(() => daemon?.stop());

  test('with the token, calls and sessions in its namespaces go through', async () => {
    const client = new Client(daemon.address, { token: ORDERS_TOKEN });
    try {
      await roundTrip(client, 'orders/42');
    } finally {
      client.close();
    }
  });

  test('outside its namespaces: PermissionDeniedError, for calls and sessions', async () => {
    const client = new Client(daemon.address, { token: ORDERS_TOKEN });
    try {
      await assert.rejects(client.acquire('jobs/1', { ttlMs: 1000 }), PermissionDeniedError);
      await assert.rejects(client.using('jobs/1', { ttlMs: 1000 }, async () => 1), PermissionDeniedError);
    } finally {
      client.close();
    }
  });

  test('elections: with the token, inside its namespaces; outside, PermissionDeniedError; without, UnauthenticatedError', async () => {
    const client = new Client(daemon.address, { token: ORDERS_TOKEN });
    const anonymous = new Client(daemon.address);
    try {
      const leadership = await client.campaign('orders/leader', { value: 'a', ttlMs: 5000 });
      assert.equal((await client.leader('orders/leader')).term, leadership.term);
      const changes = client.observe('orders/leader');
      assert.equal((await changes.next()).value.term, leadership.term);
      await changes.return();
      assert.equal(await leadership.resign(), true);
      await assert.rejects(client.campaign('jobs/leader', { ttlMs: 5000 }), PermissionDeniedError);
      await assert.rejects(client.leader('jobs/leader'), PermissionDeniedError);
      await assert.rejects(client.observe('jobs/leader').next(), PermissionDeniedError);
      await assert.rejects(client.resign('jobs/leader', leadership.token), PermissionDeniedError);
      await assert.rejects(anonymous.campaign('orders/leader', { ttlMs: 5000 }), UnauthenticatedError);
      await assert.rejects(anonymous.leader('orders/leader'), UnauthenticatedError);
    } finally {
      client.close();
      anonymous.close();
    }
  });

  test('no token or a wrong one: UnauthenticatedError', async () => {
    for (const options of [{}, { token: 'orders-wrong' }]) {
      const client = new Client(daemon.address, options);
      try {
        await assert.rejects(client.acquire('orders/1', { ttlMs: 1000 }), (error) => {
          assert.ok(error instanceof UnauthenticatedError, String(error));
          assert.equal(error.kind, 'unauthenticated');
          assert.equal(error.message.includes(ORDERS_TOKEN), false);
          return true;
        });
        await assert.rejects(client.hold('orders/1', { ttlMs: 1000 }), UnauthenticatedError);
      } finally {
        client.close();
      }
    }
  });
});

/** A private CA, a server certificate for 127.0.0.1/localhost, a client certificate. */
function makePki() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redlockd-node-pki-'));
  const file = (name) => path.join(dir, name);
  const openssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl('req', '-x509', ...key, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=redlockd test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  const issue = (name, extensions) => {
    fs.writeFileSync(file(`${name}.ext`), extensions);
    openssl('req', ...key, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
    openssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial',
      '-out', `${name}.crt`, '-days', '2', '-extfile', `${name}.ext`);
  };
  issue('server', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  issue('client', 'subjectAltName=DNS:orders.client.test\nextendedKeyUsage=clientAuth\n');
  const read = (name) => fs.readFileSync(file(name));
  return {
    dir,
    file,
    ca: read('ca.crt'),
    clientKey: read('client.key'),
    clientCert: read('client.crt'),
  };
}

describe('TLS with a private CA', () => {
  let pki;
  let daemon;
  before(async () => {
    pki = makePki();
    daemon = await startDaemon({
      settings: { 'server.tls.cert': pki.file('server.crt'), 'server.tls.key': pki.file('server.key') },
      probe: ['--probe-ca', pki.file('ca.crt')],
    });
  });
  after(async () => {
    await daemon?.stop();
    if (pki) fs.rmSync(pki.dir, { recursive: true, force: true });
  });

  test('a client trusting the CA gets through, with or without https:// in the address', async () => {
    for (const address of [daemon.address, `https://${daemon.address}`]) {
      const client = new Client(address, { rootCert: pki.ca });
      try {
        await roundTrip(client, 'tls/ok');
      } finally {
        client.close();
      }
    }
  });

  test('plaintext, or TLS without the CA, does not get through', async () => {
    for (const address of [daemon.address, `https://${daemon.address}`]) {
      const client = new Client(address, { deadlineMs: 5000 });
      try {
        await assert.rejects(client.acquire('tls/refused', { ttlMs: 1000 }), UnavailableError);
      } finally {
        client.close();
      }
    }
  });

  test('a client key without its certificate is refused before connecting', () => {
    assert.throws(() => new Client(daemon.address, { rootCert: pki.ca, privateKey: pki.clientKey }),
      (error) => error instanceof InvalidArgumentError && error.field === 'certChain');
  });
});

describe('mutual TLS', () => {
  let pki;
  let daemon;
  before(async () => {
    pki = makePki();
    daemon = await startDaemon({
      settings: {
        'server.tls.cert': pki.file('server.crt'),
        'server.tls.key': pki.file('server.key'),
        'server.tls.client_ca': pki.file('ca.crt'),
      },
      probe: ['--probe-ca', pki.file('ca.crt'), '--probe-cert', pki.file('client.crt'), '--probe-key', pki.file('client.key')],
    });
  });
  after(async () => {
    await daemon?.stop();
    if (pki) fs.rmSync(pki.dir, { recursive: true, force: true });
  });

  test('with a client certificate signed by the CA, calls and sessions go through', async () => {
    const client = new Client(daemon.address, { rootCert: pki.ca, privateKey: pki.clientKey, certChain: pki.clientCert });
    try {
      await roundTrip(client, 'mtls/ok');
    } finally {
      client.close();
    }
  });

  test('without a client certificate the call fails', async () => {
    const client = new Client(daemon.address, { rootCert: pki.ca, deadlineMs: 5000 });
    try {
      await assert.rejects(client.acquire('mtls/refused', { ttlMs: 1000 }), (error) => {
        assert.ok(error instanceof RedlockdError, String(error));
        assert.ok(error instanceof UnavailableError || error instanceof UnauthenticatedError, String(error));
        return true;
      });
    } finally {
      client.close();
    }
  });
});
