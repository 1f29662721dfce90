// TcpTransport on loopback, all ranks in one process: tagged messages in both orders, large
// payloads over one and two channels, IPv6, refusals (wrong token, unknown job id, a duplicate
// connection, a world-size disagreement, a port in use) seen on both sides, and a peer that
// closes failing every pending receive. Small and bounded; no timing assertions.
import * as net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { WebcclError } from '../../src/core/errors.js';
import { TcpTransport, type TcpTransportOptions } from '../../src/transport/tcp/nodejs/tcp-transport.js';
import { canListen } from '../helpers/net.js';

const JOB = 'job-tcp';
const TOKEN = 'secret';
const open: TcpTransport[] = [];
afterEach(() => open.splice(0).forEach((t) => t.close()));

const hasIPv6 = await canListen('::1');
if (!hasIPv6) console.warn('transport-tcp: no IPv6 loopback (::1) on this machine; skipping the IPv6 test');

type Extra = Partial<TcpTransportOptions>;

async function listen(rank: number, size: number, extra: Extra = {}): Promise<TcpTransport> {
  const t = await TcpTransport.listen({
    rank,
    size,
    jobId: JOB,
    token: TOKEN,
    timeoutMs: 10_000,
    onReject: () => {},
    ...extra,
  });
  open.push(t);
  return t;
}

async function mesh(size: number, extra: Extra = {}): Promise<TcpTransport[]> {
  const ts = await Promise.all(Array.from({ length: size }, (_, r) => listen(r, size, extra)));
  const addresses = ts.map((t) => t.address);
  await Promise.all(ts.map((t) => t.connect(addresses)));
  return ts;
}

/** Large buffers are compared by bytes: a deep-equality diff of 8 MiB would take minutes. */
const same = (a: Uint8Array, b: Uint8Array) => Buffer.from(a.buffer, a.byteOffset, a.length).equals(b);
const fill = (n: number, seed: number) => new Uint8Array(n).map((_, i) => (i * 7 + seed) & 255);

describe('TcpTransport', () => {
  it('3 ranks exchange tagged messages, receives posted before and after the data', async () => {
    const ts = await mesh(3);
    for (const [seq, recvFirst] of [
      [1, true],
      [2, false],
    ] as const) {
      const got = ts.map(() => ts.map(() => new Uint8Array(5)));
      const recvs = () =>
        ts.flatMap((t, r) =>
          ts.map((_, p) => (p === r ? null : t.recv(p, { comm: 0, seq, step: 0 }, got[r][p]))).filter((x) => x),
        );
      const pending = recvFirst ? recvs() : [];
      await Promise.all(
        ts.flatMap((t, r) =>
          ts
            .map((_, p) => (p === r ? null : t.send(p, { comm: 0, seq, step: 0 }, fill(5, r * 10 + p))))
            .filter((x) => x),
        ),
      );
      await new Promise((r) => setTimeout(r, 20));
      await Promise.all(recvFirst ? pending : recvs());
      for (let r = 0; r < 3; r++)
        for (let p = 0; p < 3; p++) if (p !== r) expect(got[r][p]).toEqual(fill(5, p * 10 + r));
    }
    const [a, b] = [new Uint8Array(1), new Uint8Array(1)];
    const ra = ts[1].recv(0, { comm: 2, seq: 9, step: 1 }, a);
    const rb = ts[1].recv(0, { comm: 2, seq: 9, step: 2 }, b);
    await ts[0].send(1, { comm: 2, seq: 9, step: 2 }, Uint8Array.of(22));
    await ts[0].send(1, { comm: 2, seq: 9, step: 1 }, Uint8Array.of(11));
    await Promise.all([ra, rb]);
    expect([a[0], b[0]]).toEqual([11, 22]);
  });

  for (const nchannels of [1, 2]) {
    it(`moves 8 MiB both ways with ${nchannels} channel(s)`, async () => {
      const [t0, t1] = await mesh(2, { nchannels });
      const n = 8 << 20;
      const [x, y] = [fill(n, 1), fill(n, 2)];
      const [gx, gy] = [new Uint8Array(n), new Uint8Array(n)];
      await Promise.all([
        t0.send(1, { comm: 0, seq: 0, step: 0 }, x),
        t1.send(0, { comm: 0, seq: 0, step: 0 }, y),
        t0.send(1, { comm: 0, seq: 0, step: 1 }, y),
        t1.recv(0, { comm: 0, seq: 0, step: 0 }, gx),
        t0.recv(1, { comm: 0, seq: 0, step: 0 }, gy),
      ]);
      expect(same(gx, x)).toBe(true);
      expect(same(gy, y)).toBe(true);
      const late = new Uint8Array(n);
      await t1.recv(0, { comm: 0, seq: 0, step: 1 }, late);
      expect(same(late, y)).toBe(true);
    });
  }

  it('a large frame leaves as one write of header and payload (never a 21-byte header alone); small frames as one buffer', async () => {
    const [t0, t1] = await mesh(2);
    // What each of rank 0's sockets hands the kernel, one entry per write or writev call.
    const calls: number[][] = [];
    for (const s of (t0 as unknown as { sockets: Set<net.Socket> }).sockets) {
      type Writer = (...a: unknown[]) => unknown;
      const w = s as unknown as { _write: Writer; _writev: Writer };
      const [one, many] = [w._write.bind(s), w._writev.bind(s)];
      w._write = (chunk: Uint8Array, enc: string, cb: () => void) => {
        calls.push([chunk.length]);
        return one(chunk, enc, cb);
      };
      w._writev = (chunks: { chunk: Uint8Array }[], cb: () => void) => {
        calls.push(chunks.map((c) => c.chunk.length));
        return many(chunks, cb);
      };
    }
    const HEADER = 21;
    for (const n of [1, 16 << 10, (16 << 10) + 1, 1 << 20]) {
      calls.length = 0;
      const x = fill(n, 3);
      const got = new Uint8Array(n);
      await Promise.all([t0.send(1, { comm: 0, seq: 1, step: n }, x), t1.recv(0, { comm: 0, seq: 1, step: n }, got)]);
      expect(same(got, x)).toBe(true);
      const header = calls.filter((c) => c[0] === HEADER);
      if (n <= 16 << 10) expect(calls).toEqual([[HEADER + n]]);
      else expect(header).toEqual([[HEADER, n]]);
    }
  });

  it('a frame with none waiting before it reaches the socket within send(); frames behind a full socket keep their order', async () => {
    const [t0, t1] = await mesh(2);
    // The lengths rank 0's sockets hand on (write or writev), in order.
    const calls: number[] = [];
    for (const s of (t0 as unknown as { sockets: Set<net.Socket> }).sockets) {
      const w = s as unknown as { write: (...a: unknown[]) => boolean };
      const write = w.write.bind(s);
      w.write = (chunk: Uint8Array, ...rest: unknown[]) => {
        calls.push(chunk.length);
        return write(chunk, ...rest);
      };
    }
    const small = (seq: number) => t0.send(1, { comm: 0, seq, step: 0 }, Uint8Array.of(seq));
    const sent = small(1);
    expect(calls).toEqual([21 + 1]); // before any turn of the event loop
    const got = new Uint8Array(1);
    await Promise.all([sent, t1.recv(0, { comm: 0, seq: 1, step: 0 }, got)]);
    expect([...got]).toEqual([1]);
    // 4 frames of 8 MiB fill the socket; the small frames issued behind them go after them.
    calls.length = 0;
    const big = 8 << 20;
    const sends = [0, 1, 2, 3].map((k) => t0.send(1, { comm: 0, seq: 10 + k, step: 0 }, fill(big, k)));
    sends.push(small(2), small(3));
    const into = [0, 1, 2, 3].map(() => new Uint8Array(big));
    const [g2, g3] = [new Uint8Array(1), new Uint8Array(1)];
    await Promise.all([
      ...sends,
      ...into.map((b, k) => t1.recv(0, { comm: 0, seq: 10 + k, step: 0 }, b)),
      t1.recv(0, { comm: 0, seq: 2, step: 0 }, g2),
      t1.recv(0, { comm: 0, seq: 3, step: 0 }, g3),
    ]);
    expect(into.every((b, k) => same(b, fill(big, k)))).toBe(true);
    expect([g2[0], g3[0]]).toEqual([2, 3]);
    // Each big frame is its header, then its payload; the small ones come last, in order.
    expect(calls.filter((n) => n === big)).toHaveLength(4);
    expect(calls.slice(-2)).toEqual([22, 22]);
  });

  it.skipIf(!hasIPv6)('builds a mesh over IPv6 loopback', async () => {
    const [t0, t1] = await mesh(2, { host: '::1' });
    const got = new Uint8Array(3);
    await Promise.all([
      t0.send(1, { comm: 0, seq: 0, step: 0 }, Uint8Array.of(1, 2, 3)),
      t1.recv(0, { comm: 0, seq: 0, step: 0 }, got),
    ]);
    expect([...got]).toEqual([1, 2, 3]);
  });

  /** Rank 0 (honest) and a rank 1 with `bad` options: both sides must raise `code` (each dials the other). */
  async function refused(bad: Extra, code: string, size = 2) {
    const rejects: WebcclError[] = [];
    const t0 = await listen(0, size, { onReject: (e) => rejects.push(e), timeoutMs: 1500 });
    const t1 = await listen(1, bad.size ?? size, { ...bad, timeoutMs: 1500 });
    const mine = t0.connect([t0.address, t1.address]).catch((e) => e);
    const theirs = await t1
      .connect(Array.from({ length: t1.size }, (_, r) => (r === 0 ? t0.address : t1.address)))
      .catch((e) => e);
    expect(theirs).toMatchObject({ code });
    expect((await mine).code).toBe(code);
    expect(rejects.map((e) => e.code)).toContain(code);
    return { theirs, rejects, mine: await mine };
  }

  it('refuses a wrong token on both sides', async () => {
    const { theirs, mine } = await refused({ token: 'wrong' }, 'AUTH_FAILED');
    expect(theirs.message).toMatch(/token/);
    expect(mine.message).toMatch(/token/);
  });

  it('refuses an unknown job id on both sides', async () => {
    const { theirs } = await refused({ jobId: 'other-job' }, 'AUTH_FAILED');
    expect(theirs.message).toMatch(/job id/);
  });

  it('refuses a world-size disagreement on both sides', async () => {
    const { theirs } = await refused({ size: 3 }, 'PROTOCOL_ERROR');
    expect(theirs.message).toMatch(/size/);
  });

  it('refuses a peer that connects twice, on both sides', async () => {
    const rejects: WebcclError[] = [];
    const [t0, t1] = await mesh(2, { onReject: (e) => rejects.push(e) });
    const twin = await listen(1, 2);
    const err = await twin.connect([t0.address, twin.address]).catch((e) => e);
    expect(err).toMatchObject({ code: 'PROTOCOL_ERROR' });
    expect(err.message).toMatch(/duplicate/);
    expect(rejects.map((e) => e.message).join()).toMatch(/duplicate/);
    // The mesh itself is unharmed.
    const got = new Uint8Array(1);
    await Promise.all([
      t1.send(0, { comm: 0, seq: 0, step: 0 }, Uint8Array.of(5)),
      t0.recv(1, { comm: 0, seq: 0, step: 0 }, got),
    ]);
    expect(got[0]).toBe(5);
  });

  it('refuses a peer that sends data before the handshake, or a huge HELLO', async () => {
    const rejects: WebcclError[] = [];
    const t0 = await listen(0, 2, { onReject: (e) => rejects.push(e) });
    for (const bytes of [Uint8Array.of(16, 0, 0, 0, 1), Uint8Array.of(1, 0xff, 0xff, 0xff, 0xff)]) {
      const s = net.connect(t0.address);
      s.on('error', () => {});
      s.write(bytes);
      await new Promise((r) => s.once('close', r));
    }
    expect(rejects.map((e) => e.code)).toEqual(['PROTOCOL_ERROR', 'PROTOCOL_ERROR']);
  });

  it('reports a port in use', async () => {
    const t = await listen(0, 1);
    await expect(listen(0, 1, { port: t.address.port })).rejects.toMatchObject({ code: 'ADDRESS_IN_USE' });
  });

  it('fails every pending receive when a peer closes, and later operations too', async () => {
    const [t0, t1] = await mesh(2);
    const pending = [0, 1, 2].map((s) => t0.recv(1, { comm: 0, seq: 0, step: s }, new Uint8Array(4)));
    t1.close();
    const errs = await Promise.all(pending.map((p) => p.catch((e) => e)));
    expect(errs.map((e) => e.code)).toEqual(['CONNECTION_CLOSED', 'CONNECTION_CLOSED', 'CONNECTION_CLOSED']);
    expect(errs[1]).toBe(errs[0]);
    await expect(t0.send(1, { comm: 0, seq: 1, step: 0 }, new Uint8Array(1))).rejects.toBe(errs[0]);
  });

  it('a peer that sent its last message and closed: a receive posted after the close still gets it', async () => {
    // A rank that finished its last op exits at once; its peer may post that op's receive later.
    const [t0, t1] = await mesh(2);
    const watch = t0.recv(1, { comm: 0, seq: 9, step: 0 }, new Uint8Array(1)).catch((e) => e);
    await t1.send(0, { comm: 0, seq: 0, step: 0 }, fill(100, 3));
    t1.close();
    expect((await watch).code).toBe('CONNECTION_CLOSED'); // the close has been seen
    const into = new Uint8Array(100);
    await t0.recv(1, { comm: 0, seq: 0, step: 0 }, into);
    expect(same(into, fill(100, 3))).toBe(true);
    await expect(t0.recv(1, { comm: 0, seq: 0, step: 1 }, new Uint8Array(1))).rejects.toMatchObject({
      code: 'CONNECTION_CLOSED',
    });
  });

  it('fails a receive whose payload was arriving when its peer went away', async () => {
    const [t0, t1] = await mesh(2);
    const into = new Uint8Array(32 << 20);
    const r = t1.recv(0, { comm: 0, seq: 0, step: 0 }, into).then(
      () => 'complete',
      (e) => e.code,
    );
    void t0.send(1, { comm: 0, seq: 0, step: 0 }, new Uint8Array(32 << 20)).catch(() => undefined);
    // Let part of the payload through, then drop the sender mid-payload.
    await new Promise((ok) => setTimeout(ok, 5));
    t0.close();
    expect(await r).toBe('CONNECTION_CLOSED');
  });

  it('fails a receive that meets a message of its slot from another communicator field, posted first or held first', async () => {
    const [t0, t1] = await mesh(2);
    const posted = t1.recv(0, { comm: 1, seq: 4, step: 2 }, new Uint8Array(4));
    await t0.send(1, { comm: 2, seq: 4, step: 2 }, new Uint8Array(4));
    await expect(posted).rejects.toMatchObject({ code: 'MISMATCH', details: { got: 2, want: 1 } });
    await t0.send(1, { comm: 3, seq: 5, step: 0 }, new Uint8Array(4));
    await new Promise((ok) => setTimeout(ok, 50)); // held before the receive is posted
    await expect(t1.recv(0, { comm: 4, seq: 5, step: 0 }, new Uint8Array(4))).rejects.toMatchObject({
      code: 'MISMATCH',
      details: { got: 3, want: 4 },
    });
  });

  it('fails a receive whose payload length differs', async () => {
    const [t0, t1] = await mesh(2);
    const r = t1.recv(0, { comm: 0, seq: 0, step: 0 }, new Uint8Array(8));
    await t0.send(1, { comm: 0, seq: 0, step: 0 }, new Uint8Array(4));
    await expect(r).rejects.toMatchObject({ code: 'SIZE_MISMATCH' });
  });

  it('tag spaces: a message is received only in its space; abortSpace fails that space alone (its point-to-point too), the links go on', async () => {
    const [t0, t1, t2] = await mesh(3);
    const tag = (space: number) => ({ comm: 0, seq: 1, step: 0, space });
    const [a, b] = [new Uint8Array(1), new Uint8Array(1)];
    const inA = t1.recv(0, tag(5), a);
    const inB = t1.recv(0, tag(6), b);
    await t0.send(1, tag(6), Uint8Array.of(6));
    await t0.send(1, tag(5), Uint8Array.of(5));
    await Promise.all([inA, inB]);
    expect([a[0], b[0]]).toEqual([5, 6]);
    const doomed = [t1.recv(0, tag(7), new Uint8Array(1)), t1.recv(0, tag(7 + 0x80000000), new Uint8Array(1))];
    const bystander = t2.recv(0, tag(7), new Uint8Array(1)).then(
      () => 'received',
      (e) => e.code,
    );
    t0.abortSpace(7, { code: 'ABORTED', reason: 'group failed', details: { missing: [1] } }, [1]);
    for (const d of doomed)
      await expect(d).rejects.toMatchObject({ code: 'ABORTED', details: { space: 7, by: 0, missing: [1] } });
    await expect(t0.recv(1, tag(7), new Uint8Array(1))).rejects.toMatchObject({
      code: 'ABORTED',
      details: { space: 7 },
    });
    // The world's space and the peer not told still work.
    const w = new Uint8Array(1);
    const inW = t1.recv(0, tag(0), w);
    await t0.send(1, tag(0), Uint8Array.of(9));
    await inW;
    expect(w[0]).toBe(9);
    await t0.send(2, tag(7), Uint8Array.of(1));
    expect(await bystander).toBe('received');
  });
});
