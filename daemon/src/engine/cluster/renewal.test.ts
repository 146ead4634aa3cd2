import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkCAConfig, needsRenewal, rotationInProgress, tlsInfo } from './certs.js';
import type { ClusterStore } from './store.js';
import { RenewalSchedule, renewalDelay, type Clock, type Validity } from './renewal.js';

const HOUR = 3600_000;
const DAY = 24 * HOUR;

/** A clock whose time moves only when the test says, and whose timers fire then. */
class FakeClock implements Clock {
  t = Date.UTC(2030, 0, 1);
  private timers = new Map<number, { at: number; fn: () => void }>();
  private next = 1;
  now(): number {
    return this.t;
  }
  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.next++;
    this.timers.set(id, { at: this.t + ms, fn });
    return id;
  }
  clearTimeout(id: unknown): void {
    this.timers.delete(id as number);
  }
  pending(): number {
    return this.timers.size;
  }
  /** Moves the time on to `to`, firing the timers due on the way, in order. */
  async advance(ms: number): Promise<void> {
    const to = this.t + ms;
    for (;;) {
      const due = [...this.timers.entries()].filter(([, x]) => x.at <= to).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.timers.delete(due[0]);
      this.t = Math.max(this.t, due[1].at);
      due[1].fn();
      await new Promise((r) => setImmediate(r));
    }
    this.t = to;
    await new Promise((r) => setImmediate(r));
  }
}

test('the renewal falls between 50% and 80% of the validity, from its start', () => {
  const v: Validity = { from: 0, to: 100 * HOUR };
  assert.equal(renewalDelay(v, 0, () => 0), 50 * HOUR);
  assert.equal(renewalDelay(v, 0, () => 0.999999), Math.floor(v.from + 100 * HOUR * (0.5 + 0.3 * 0.999999)));
  assert.equal(renewalDelay(v, 10 * HOUR, () => 0.5), 55 * HOUR);
  // Already past the point: at once.
  assert.equal(renewalDelay(v, 90 * HOUR, () => 0.5), 0);
  for (let i = 0; i < 200; i++) {
    const d = renewalDelay(v, 0);
    assert.ok(d >= 50 * HOUR && d <= 80 * HOUR, `${d / HOUR} h`);
  }
});

test('the schedule renews at the planned point, then plans from the new certificate', async () => {
  const clock = new FakeClock();
  const renewedAt: number[] = [];
  const s = new RenewalSchedule(async () => {
    renewedAt.push(clock.now());
    return { from: clock.now() - HOUR, to: clock.now() + 9 * HOUR };
  }, clock, () => 0);
  s.plan({ from: clock.now() - HOUR, to: clock.now() + 9 * HOUR });
  // 50% of 10 h from an hour back: 4 h from now.
  assert.equal(s.due, clock.t + 4 * HOUR);
  await clock.advance(4 * HOUR - 1);
  assert.equal(renewedAt.length, 0);
  await clock.advance(1);
  assert.equal(renewedAt.length, 1);
  await clock.advance(4 * HOUR);
  assert.equal(renewedAt.length, 2);
  s.stop();
  await clock.advance(100 * HOUR);
  assert.equal(renewedAt.length, 2);
  assert.equal(clock.pending(), 0);
});

test('a 90-day certificate waits past the longest timer, in several', async () => {
  const clock = new FakeClock();
  let renewed = 0;
  const s = new RenewalSchedule(async () => {
    renewed++;
    return { from: clock.now(), to: clock.now() + 90 * DAY };
  }, clock, () => 0);
  s.plan({ from: clock.now(), to: clock.now() + 90 * DAY });
  await clock.advance(45 * DAY - 1000);
  assert.equal(renewed, 0);
  await clock.advance(1000);
  assert.equal(renewed, 1);
  s.stop();
});

test('now() renews at once; a failure is tried again later, with a growing delay', async () => {
  const clock = new FakeClock();
  let calls = 0;
  let fail = 2;
  const s = new RenewalSchedule(async () => {
    calls++;
    if (fail-- > 0) throw new Error('no manager');
    return { from: clock.now(), to: clock.now() + 100 * HOUR };
  }, clock, () => 0);
  s.plan({ from: clock.now(), to: clock.now() + 100 * HOUR });
  s.now();
  await clock.advance(0);
  assert.equal(calls, 1);
  await clock.advance(4999);
  assert.equal(calls, 1);
  await clock.advance(1);
  assert.equal(calls, 2);
  // The second retry waits twice as long.
  await clock.advance(9999);
  assert.equal(calls, 2);
  await clock.advance(1);
  assert.equal(calls, 3);
  assert.equal(s.due, clock.t + 50 * HOUR);
  s.stop();
});

test('now() during a renewal runs another one after it', async () => {
  const clock = new FakeClock();
  let calls = 0;
  let release!: () => void;
  const s = new RenewalSchedule(async () => {
    calls++;
    if (calls === 1) await new Promise<void>((r) => (release = r));
    return { from: clock.now(), to: clock.now() + 100 * HOUR };
  }, clock, () => 0);
  s.plan({ from: clock.now(), to: clock.now() + 100 * HOUR });
  s.now();
  await clock.advance(0);
  s.now();
  assert.equal(calls, 1);
  release();
  await clock.advance(0);
  await clock.advance(0);
  assert.equal(calls, 2);
  s.stop();
});

test('asked again during a renewal that did what was asked, the schedule does not renew twice', async () => {
  const clock = new FakeClock();
  let calls = 0;
  let needed = true;
  let release!: () => void;
  const s = new RenewalSchedule(async () => {
    calls++;
    if (calls === 1) await new Promise<void>((r) => (release = r));
    needed = false;
    return { from: clock.now(), to: clock.now() + 100 * HOUR };
  }, clock, () => 0, () => needed);
  s.plan({ from: clock.now(), to: clock.now() + 100 * HOUR });
  s.now();
  await clock.advance(0);
  s.now();
  release();
  await clock.advance(0);
  await clock.advance(0);
  assert.equal(calls, 1);
  assert.equal(s.due, clock.t + 50 * HOUR);
  s.stop();
});

test('CAConfig: an expiry under an hour is refused, as are a root or external CA of your own', () => {
  assert.throws(() => checkCAConfig({ NodeCertExpiry: 1800e9 }), /minimum certificate expiry time is: 1h0m0s/);
  assert.throws(() => checkCAConfig({ NodeCertExpiry: -1 }), /minimum certificate expiry/);
  assert.throws(() => checkCAConfig({ NodeCertExpiry: 'soon' }), /NodeCertExpiry/);
  checkCAConfig({ NodeCertExpiry: 3600e9, ForceRotate: 3 });
  checkCAConfig({ NodeCertExpiry: 0 });
  assert.throws(() => checkCAConfig({ ForceRotate: -1 }), /ForceRotate/);
  assert.throws(() => checkCAConfig({ SigningCACert: 'x' }), /not supported/);
  assert.throws(() => checkCAConfig({ ExternalCAs: [{ Protocol: 'cfssl', URL: 'https://ca' }] }), /not supported/);
});

test('TLS info: the root\'s subject and public key as DER', () => {
  // A P-256 root made with `openssl req -x509 -subj /CN=swarm-ca`.
  const pem = `-----BEGIN CERTIFICATE-----
MIIBfDCCASGgAwIBAgIUaxO51G8OPXcsFCg817/BR602qqgwCgYIKoZIzj0EAwIw
EzERMA8GA1UEAwwIc3dhcm0tY2EwHhcNMjYxMTI2MTg1NjM3WhcNNDYxMTIxMTg1
NjM3WjATMREwDwYDVQQDDAhzd2FybS1jYTBZMBMGByqGSM49AgEGCCqGSM49AwEH
A0IABC7CVcFdvTUGfcy09pwY2LHAqO2dQTvhcFOxrZ/FwKDmFjUUQglOArlXUUmN
52Aon4JJQS/ebmzWcxyDIlNTq+ujUzBRMB0GA1UdDgQWBBTubOF5G1Gac1MtqJ9Q
wqY90J7TBjAfBgNVHSMEGDAWgBTubOF5G1Gac1MtqJ9QwqY90J7TBjAPBgNVHRMB
Af8EBTADAQH/MAoGCCqGSM49BAMCA0kAMEYCIQDma1wszD1jymxjpQ+LZYYuuGrb
oqiAaOAfmLjh5SQ/tgIhANpK6prJTTiRyJMQPygJT2IVrOxTbe84C8n7087QrTnd
-----END CERTIFICATE-----
`;
  const info = tlsInfo(pem);
  assert.equal(info.TrustRoot, pem);
  // SEQUENCE { SET { SEQUENCE { OID commonName, UTF8String "swarm-ca" } } }
  assert.equal(Buffer.from(info.CertIssuerSubject, 'base64').toString('hex'), '30133111300f06035504030c08737761726d2d6361');
  assert.match(Buffer.from(info.CertIssuerPublicKey, 'base64').toString('hex'), /^3059301306072a8648ce3d020106082a8648ce3d030107034200/);
});

test('a forced rotation: the nodes whose last certificate is older must renew, down nodes aside', () => {
  const objects: Record<string, Record<string, object>> = {
    cluster: { default: { Spec: { CAConfig: { ForceRotate: 2 } } } },
    nodes: { a: { ID: 'a', Status: { State: 'ready' } }, b: { ID: 'b', Status: { State: 'ready' } }, c: { ID: 'c', Status: { State: 'down' } } },
    certs: { a: { Rotation: 2 }, b: { Rotation: 1 } },
  };
  const store = {
    get: (kind: string, id: string) => (objects[kind]?.[id] ? { obj: objects[kind]![id] } : undefined),
    list: (kind: string) => Object.values(objects[kind] ?? {}).map((obj) => ({ obj })),
  } as unknown as ClusterStore;
  assert.equal(needsRenewal(store, 'a'), false);
  assert.equal(needsRenewal(store, 'b'), true);
  assert.equal(needsRenewal(store, 'c'), true);
  assert.equal(rotationInProgress(store), true);
  objects.certs!.b = { Rotation: 2 };
  // c is down: it renews when it comes back, and holds nothing up meanwhile.
  assert.equal(rotationInProgress(store), false);
  objects.cluster!.default = { Spec: { CAConfig: {} } };
  assert.equal(needsRenewal(store, 'c'), false);
});
