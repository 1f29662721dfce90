// The mesh over both carriers (TCP and WebSocket), all ranks in one process: the send/recv grid
// with receives posted before and after the data, tags, payloads crossing the WebSocket chunk
// size over one and two channels, holds within and over their limits, abort and abortSpace, a
// peer closing, a wrong token refused on both sides. Then what only the WebSocket carrier has:
// other paths refused, a message over its limit refused before it is buffered. No timing asserts.
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { WebcclError } from '../../src/core/errors.js';
import type { Mesh, MeshOptions } from '../../src/transport/mesh/mesh.js';
import { TcpTransport } from '../../src/transport/tcp/nodejs/tcp-transport.js';
import { CHUNK, MAX_MESSAGE } from '../../src/transport/ws/messages.js';
import { LINK_PATH } from '../../src/transport/ws/nodejs/ws-carrier.js';
import { WsTransport } from '../../src/transport/ws/nodejs/ws-transport.js';

const JOB = 'job-mesh';
const TOKEN = 'secret';
const open: Mesh[] = [];
afterEach(() => open.splice(0).forEach((t) => t.close()));

type Extra = Partial<MeshOptions>;
const CARRIERS = { tcp: (o: MeshOptions) => TcpTransport.listen(o), ws: (o: MeshOptions) => WsTransport.listen(o) };

const same = (a: Uint8Array, b: Uint8Array) => Buffer.from(a.buffer, a.byteOffset, a.length).equals(b);
const fill = (n: number, seed: number) => new Uint8Array(n).map((_, i) => (i * 7 + seed) & 255);
const tag = (seq: number, step = 0, space = 0) => ({ comm: 0, seq, step, space });

for (const [name, make] of Object.entries(CARRIERS)) {
  const listen = async (rank: number, size: number, extra: Extra = {}) => {
    const t = await make({ rank, size, jobId: JOB, token: TOKEN, timeoutMs: 10_000, onReject: () => {}, ...extra });
    open.push(t);
    return t;
  };
  const mesh = async (size: number, extra: Extra = {}) => {
    const ts = await Promise.all(Array.from({ length: size }, (_, r) => listen(r, size, extra)));
    await Promise.all(ts.map((t) => t.connect(ts.map((x) => x.address))));
    return ts;
  };

  describe(`mesh over ${name}`, () => {
    it('names its carrier', async () => {
      const [t] = await mesh(1);
      expect(t.carrierName).toBe(name);
    });

    it('3 ranks: every pair, receives posted before and after the data, sizes 0, 1 and odd', async () => {
      const ts = await mesh(3);
      for (const [seq, recvFirst, n] of [
        [1, true, 0],
        [2, false, 1],
        [3, true, 77],
        [4, false, 16 * 1024 + 3],
      ] as const) {
        const got = ts.map(() => ts.map(() => new Uint8Array(n)));
        const recvs = () =>
          ts.flatMap((t, r) => ts.flatMap((_, p) => (p === r ? [] : [t.recv(p, tag(seq), got[r][p])])));
        const pending = recvFirst ? recvs() : [];
        await Promise.all(
          ts.flatMap((t, r) => ts.flatMap((_, p) => (p === r ? [] : [t.send(p, tag(seq), fill(n, r * 10 + p))]))),
        );
        await Promise.all(recvFirst ? pending : recvs());
        for (let r = 0; r < 3; r++)
          for (let p = 0; p < 3; p++) if (p !== r) expect(same(got[r][p], fill(n, p * 10 + r))).toBe(true);
      }
    });

    it('matches by tag, whatever the order of arrival', async () => {
      const [t0, t1] = await mesh(2);
      const [a, b] = [new Uint8Array(1), new Uint8Array(1)];
      const ra = t1.recv(0, { comm: 2, seq: 9, step: 1 }, a);
      const rb = t1.recv(0, { comm: 2, seq: 9, step: 2 }, b);
      await t0.send(1, { comm: 2, seq: 9, step: 2 }, Uint8Array.of(22));
      await t0.send(1, { comm: 2, seq: 9, step: 1 }, Uint8Array.of(11));
      await Promise.all([ra, rb]);
      expect([a[0], b[0]]).toEqual([11, 22]);
    });

    for (const nchannels of [1, 2]) {
      it(`moves payloads across the chunk size both ways, one held, with ${nchannels} channel(s)`, async () => {
        const [t0, t1] = await mesh(2, { nchannels });
        for (const n of [CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 5]) {
          const [x, y] = [fill(n, 1), fill(n, 2)];
          const [gx, gy, late] = [new Uint8Array(n), new Uint8Array(n), new Uint8Array(n)];
          await Promise.all([
            t0.send(1, tag(n, 0), x),
            t1.send(0, tag(n, 0), y),
            t0.send(1, tag(n, 1), y),
            t1.recv(0, tag(n, 0), gx),
            t0.recv(1, tag(n, 0), gy),
          ]);
          await t1.recv(0, tag(n, 1), late);
          expect([same(gx, x), same(gy, y), same(late, y)]).toEqual([true, true, true]);
        }
      });
    }

    it("an op's messages go on the first tag.ways connections of the pair (all without it); the receiver matches them by tag alone", async () => {
      const [t0, t1] = await mesh(2, { nchannels: 3 });
      expect([t0.channels, t1.channels]).toEqual([3, 3]);
      // Which connection each write to rank 1 took (the links are the mesh's own).
      const used: number[] = [];
      for (const link of (
        t0 as unknown as { outbound: { channel: number; write: (...a: unknown[]) => Promise<void> }[][] }
      ).outbound[1]) {
        const write = link.write.bind(link);
        link.write = (...a: unknown[]) => {
          used.push(link.channel);
          return write(...a);
        };
      }
      for (const [seq, ways, expected] of [
        [10, 1, [0]],
        [11, 2, [0, 1]],
        [12, undefined, [0, 1, 2]],
        [13, 7, [0, 1, 2]],
      ] as const) {
        used.length = 0;
        const got = Array.from({ length: 6 }, () => new Uint8Array(5));
        const recvs = got.map((g, step) => t1.recv(0, tag(seq, step), g)); // posted without ways
        await Promise.all(got.map((_, step) => t0.send(1, { ...tag(seq, step), ways }, fill(5, step))));
        await Promise.all(recvs);
        expect(got.every((g, step) => same(g, fill(5, step)))).toBe(true);
        expect([...new Set(used)].sort(), `ways ${ways}`).toEqual(expected);
      }
      for (const ways of [0, 1.5, -1]) {
        let e: WebcclError | undefined;
        try {
          await t0.send(1, { ...tag(20), ways }, fill(1, 0)); // refused at the call, as a bad peer is
        } catch (x) {
          e = x as WebcclError;
        }
        expect(e?.code, `ways ${ways}`).toBe('INVALID_ARGUMENT');
      }
    });

    it('fails the mesh when a peer holds more than its limit', async () => {
      const [t0, t1] = await mesh(2, { limits: { maxHeldMessages: 2, maxHeldBytes: 1 << 20 } });
      for (let s = 0; s < 3; s++) void t0.send(1, tag(s), new Uint8Array(8)).catch(() => undefined);
      const err = await t1.recv(0, tag(99), new Uint8Array(1)).catch((e: WebcclError) => e);
      expect(err).toBeInstanceOf(WebcclError);
      expect((err as WebcclError).code).toBe('PROTOCOL_ERROR');
    });

    it('abort reaches the peer with its reason; abortSpace fails that space only', async () => {
      const [t0, t1, t2] = await mesh(3);
      const doomed = t1.recv(0, tag(1, 0, 7), new Uint8Array(1));
      t0.abortSpace(7, { code: 'ABORTED', reason: 'group failed' }, [1]);
      await expect(doomed).rejects.toMatchObject({ code: 'ABORTED', details: { space: 7, by: 0 } });
      const w = new Uint8Array(1);
      const inW = t1.recv(0, tag(2), w);
      await t0.send(1, tag(2), Uint8Array.of(9));
      await inW;
      expect(w[0]).toBe(9);
      const pending = [t1.recv(0, tag(3), new Uint8Array(1)), t2.recv(0, tag(3), new Uint8Array(1))];
      t0.abort({ code: 'ABORTED', reason: 'stop now' });
      for (const p of pending)
        await expect(p).rejects.toMatchObject({ code: 'ABORTED', details: { by: 0, reason: 'stop now' } });
    });

    it('fails every pending receive when a peer closes, and later operations too', async () => {
      const [t0, t1] = await mesh(2);
      const pending = [0, 1].map((s) => t0.recv(1, tag(0, s), new Uint8Array(4)));
      t1.close();
      const errs = await Promise.all(pending.map((p) => p.catch((e) => e)));
      expect(errs.map((e) => e.code)).toEqual(['CONNECTION_CLOSED', 'CONNECTION_CLOSED']);
      expect(errs[0].details.peer).toBe(1);
      await expect(t0.send(1, tag(1), new Uint8Array(1))).rejects.toBe(errs[0]);
    });

    it('departed(): a peer that closed every connection without an ABORT, not one that aborted first (shrink() suspects the first)', async () => {
      const [t0, t1, t2] = await mesh(3);
      expect(t0.departed()).toEqual([]);
      const closed = t0.recv(1, tag(0), new Uint8Array(1)).catch((e: WebcclError) => e);
      t1.close(); // as a rank that ends or dies: no ABORT
      expect((await closed).code).toBe('CONNECTION_CLOSED');
      expect(t0.departed()).toEqual([1]);
      const aborted = t0.recv(2, tag(1), new Uint8Array(1)).catch((e: WebcclError) => e);
      t2.abort('rank 2 shrinks the communicator'); // alive: it writes its ABORT, then ends its links
      expect((await aborted).code).toBe('ABORTED');
      await new Promise((r) => setTimeout(r, 2500)); // past the 2 s an aborting rank keeps reading
      expect(t0.departed()).toEqual([1]);
    });

    it('refuses a wrong token on both sides, naming the rank', async () => {
      const rejects: WebcclError[] = [];
      const t0 = await listen(0, 2, { onReject: (e) => rejects.push(e), timeoutMs: 1500 });
      const t1 = await listen(1, 2, { token: 'wrong', timeoutMs: 1500 });
      const mine = t0.connect([t0.address, t1.address]).catch((e) => e);
      const theirs = await t1.connect([t0.address, t1.address]).catch((e) => e);
      expect(theirs).toMatchObject({ code: 'AUTH_FAILED', details: { peer: 0 } });
      // The honest side's connect fails AUTH_FAILED naming rank 1 even when rank 1, failing first,
      // closes our dial before answering it (the close is then reported as what it follows from).
      // On rank 1's own dial the honest side refuses its proof (AUTH_FAILED, naming it), unless
      // rank 1 refused our proof on our dial first and closed its dial before sending its own:
      // then that handshake ends closed by rank 1. Either way it names rank 1.
      expect(
        rejects.some((e) => ['AUTH_FAILED', 'CONNECTION_CLOSED'].includes(e.code) && e.details.peer === 1),
        rejects.map((e) => e.message).join('; '),
      ).toBe(true);
      expect(await mine).toMatchObject({ code: 'AUTH_FAILED', details: { peer: 1 } });
    });

    it('reports a port in use', async () => {
      const t = await listen(0, 1);
      await expect(listen(0, 1, { port: t.address.port })).rejects.toMatchObject({ code: 'ADDRESS_IN_USE' });
    });
  });
}

describe('mesh over ws: the carrier itself', () => {
  const connectRaw = (url: string, o: object = {}) => new WebSocket(url, { perMessageDeflate: false, ...o });

  it('answers WebSocket upgrades on its link path only', async () => {
    const t = await WsTransport.listen({ rank: 0, size: 2, jobId: JOB, token: TOKEN, onReject: () => {} });
    open.push(t);
    const ws = connectRaw(`ws://127.0.0.1:${t.address.port}/elsewhere`);
    ws.on('error', () => {});
    const status = await new Promise((r) => ws.once('unexpected-response', (_q, res) => r(res.statusCode)));
    expect(status).toBe(404);
    ws.terminate();
    expect(LINK_PATH).toBe('/webccl-link');
  });

  it('refuses a message over its limit before buffering it, a data frame before the handshake, a huge HELLO, a text message', async () => {
    const rejects: WebcclError[] = [];
    const t = await WsTransport.listen({
      rank: 0,
      size: 2,
      jobId: JOB,
      token: TOKEN,
      onReject: (e) => rejects.push(e),
    });
    open.push(t);
    for (const bytes of [
      new Uint8Array(MAX_MESSAGE + 1),
      Uint8Array.of(16, 0, 0, 0, 1),
      Uint8Array.of(1, 0xff, 0xff, 0xff, 0xff),
      'hello',
    ]) {
      const ws = connectRaw(`ws://127.0.0.1:${t.address.port}${LINK_PATH}`);
      ws.on('error', () => {});
      await new Promise((r) => ws.once('open', r));
      ws.send(bytes);
      const code = await new Promise((r) => ws.once('close', r));
      if (bytes.length > MAX_MESSAGE) expect(code).toBe(1009); // message too big
    }
    await new Promise((r) => setTimeout(r, 50));
    expect(rejects.map((e) => e.code)).toEqual([
      'PROTOCOL_ERROR',
      'PROTOCOL_ERROR',
      'PROTOCOL_ERROR',
      'PROTOCOL_ERROR',
    ]);
    expect(rejects[0].message).toMatch(new RegExp(`over the limit of ${MAX_MESSAGE} bytes`));
    expect(rejects[3].message).toMatch(/text WebSocket message/);
  });
});
