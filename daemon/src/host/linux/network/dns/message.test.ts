import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { test } from 'node:test';
import { buildAnswer, parseAnswerAddresses, parseQuery, RCODE_FORMERR, RCODE_SERVFAIL } from './message.js';
import { answerQuery } from './server.js';

/** A query for `name` of `type` with id 0x1234 and RD set. */
function query(name: string, type = 1): Buffer {
  const labels = name.split('.').flatMap((l) => [Buffer.from([l.length]), Buffer.from(l)]);
  const tail = Buffer.alloc(4);
  tail.writeUInt16BE(type, 0);
  tail.writeUInt16BE(1, 2);
  return Buffer.concat([Buffer.from([0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]), ...labels, Buffer.from([0]), tail]);
}

const rcode = (msg: Buffer) => msg.readUInt16BE(2) & 0xf;
const answers = (msg: Buffer) => msg.readUInt16BE(6);

test('a query is parsed; the answer echoes id and question and carries the A records', () => {
  const q = query('web.front');
  const parsed = parseQuery(q)!;
  assert.equal(parsed.name, 'web.front');
  assert.equal(parsed.type, 1);
  const a = buildAnswer(q, parsed, ['172.18.0.2', '172.18.0.3']);
  assert.equal(a.readUInt16BE(0), 0x1234);
  assert.equal(a.readUInt16BE(2) & 0x8000, 0x8000, 'a response');
  assert.equal(a.readUInt16BE(2) & 0x0100, 0x0100, 'RD echoed');
  assert.equal(answers(a), 2);
  assert.deepEqual([...a.subarray(a.length - 4)], [172, 18, 0, 3]);
  assert.deepEqual(a.subarray(12, parsed.end), q.subarray(12, parsed.end));
});

test('malformed messages are no queries', () => {
  assert.equal(parseQuery(Buffer.alloc(5)), undefined);
  const response = query('x');
  response[2] |= 0x80;
  assert.equal(parseQuery(response), undefined);
  const truncated = query('web.front').subarray(0, 16);
  assert.equal(parseQuery(truncated), undefined);
  const pointer = Buffer.concat([query('a').subarray(0, 12), Buffer.from([0xc0, 0x0c, 0, 1, 0, 1])]);
  assert.equal(parseQuery(pointer), undefined);
});

test('answerQuery: engine names answered (AAAA empty), garbage FORMERR, unknown names forwarded, no upstream SERVFAIL', async () => {
  const known = { lookup: (n: string) => (n === 'web' ? ['10.0.0.2'] : undefined), upstreams: () => [] as string[] };
  const a = (await answerQuery(query('web'), known, 'udp'))!;
  assert.equal(rcode(a), 0);
  assert.equal(answers(a), 1);
  const aaaa = (await answerQuery(query('web', 28), known, 'udp'))!;
  assert.equal(rcode(aaaa), 0);
  assert.equal(answers(aaaa), 0);
  const garbage = Buffer.from([0xab, 0xcd, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 9, 1]);
  assert.equal(rcode((await answerQuery(garbage, known, 'udp'))!), RCODE_FORMERR);
  assert.equal(rcode((await answerQuery(query('example.test'), known, 'udp'))!), RCODE_SERVFAIL);
  // An upstream on loopback gets the query as sent and its answer comes back.
  const upstream = dgram.createSocket('udp4');
  await new Promise<void>((r) => upstream.bind(0, '127.0.0.1', r));
  upstream.on('message', (msg, rinfo) => upstream.send(buildAnswer(msg, parseQuery(msg)!, ['192.0.2.9']), rinfo.port, rinfo.address));
  try {
    const forwarded = (await answerQuery(query('example.test'), { ...known, upstreams: () => [`127.0.0.1:${upstream.address().port}`] }, 'udp'))!;
    assert.equal(forwarded.readUInt16BE(0), 0x1234);
    assert.deepEqual([...forwarded.subarray(forwarded.length - 4)], [192, 0, 2, 9]);
  } finally {
    upstream.close();
  }
});

test('answerQuery: a name with IPv4 and IPv6 addresses gets A records for A, AAAA records for AAAA, both for ANY', async () => {
  const known = { lookup: (n: string) => (n === 'web' ? ['10.0.0.2', 'fd00:1::2'] : undefined), upstreams: () => [] as string[] };
  const a = (await answerQuery(query('web'), known, 'udp'))!;
  assert.equal(answers(a), 1);
  assert.equal(a.readUInt16BE(a.length - 14), 1, 'type A');
  assert.deepEqual([...a.subarray(a.length - 4)], [10, 0, 0, 2]);
  const aaaa = (await answerQuery(query('web', 28), known, 'udp'))!;
  assert.equal(rcode(aaaa), 0);
  assert.equal(answers(aaaa), 1);
  assert.equal(aaaa.readUInt16BE(aaaa.length - 26), 28, 'type AAAA');
  assert.equal(aaaa.readUInt16BE(aaaa.length - 18), 16, 'rdlength 16');
  assert.deepEqual([...aaaa.subarray(aaaa.length - 16)], [0xfd, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
  const any = (await answerQuery(query('web', 255), known, 'udp'))!;
  assert.equal(answers(any), 2);
});

test('the addresses of an answer are read with their TTLs (A and AAAA, behind compressed names)', () => {
  const query = Buffer.from('abcd01000001000000000000076578616d706c6504746573740000010001', 'hex');
  const q = parseQuery(query)!;
  const answer = buildAnswer(query, q, ['10.1.2.3', 'fd00::5'], 0, 42);
  assert.deepEqual(parseAnswerAddresses(answer), { name: 'example.test', records: [{ address: '10.1.2.3', ttl: 42 }, { address: 'fd00::5', ttl: 42 }] });
  assert.equal(parseAnswerAddresses(query), undefined, 'a query is not an answer');
  assert.equal(parseAnswerAddresses(answer.subarray(0, answer.length - 3)), undefined, 'a truncated answer is refused');
});
