// What `webccl perf --plot` draws: a line per datatype, op and placement of a report, each
// legend entry naming only what tells its line apart, and a title with what they all share
// (the collective, the ranks, a datatype or op common to every line, and oversubscription:
// more ranks than cores take turns on them, which is what such a chart then measures).
import type { PerfReport, ResultRow } from './format.js';
import type { ChartSeries } from './plot.js';

const distinct = <T>(xs: T[]): T[] => [...new Set(xs)];

/** The chart lines of one report: out-of-place and in-place busbw per datatype and op. */
export function reportSeries(r: PerfReport, label = `webccl ${r.transport}`): ChartSeries[] {
  const key = (x: ResultRow) => `${x.type} ${x.redop}`;
  const manyTypes = distinct(r.rows.map((x) => x.type)).length > 1;
  const manyOps = distinct(r.rows.map((x) => x.redop)).length > 1;
  return distinct(r.rows.map(key)).flatMap((k) => {
    const rows = r.rows.filter((x) => key(x) === k);
    const name = (place: string) =>
      [label, manyTypes && rows[0].type, manyOps && rows[0].redop, place].filter(Boolean).join(' ');
    const oop = { label: name('out-of-place'), points: rows.map((x) => ({ size: x.size, busbw: x.oop.busbw })) };
    const ip = rows.filter((x) => x.ip !== null).map((x) => ({ size: x.size, busbw: x.ip!.busbw }));
    return ip.length ? [oop, { label: name('in-place'), points: ip }] : [oop];
  });
}

/**
 * "allreduce, 4 ranks on 2 cores (oversubscribed 2×), bfloat16 sum: bus bandwidth": `who` names
 * the ranks, `worldRanks` is how many ran on this machine's `r.host.cpus` cores.
 */
export function chartTitle(r: PerfReport, who: string, worldRanks: number): string {
  const cores = r.host.cpus;
  const over =
    worldRanks > cores
      ? ` on ${cores} core${cores === 1 ? '' : 's'} (oversubscribed ${+(worldRanks / cores).toFixed(1)}×)`
      : '';
  const types = distinct(r.rows.map((x) => x.type));
  const ops = distinct(r.rows.map((x) => x.redop)).filter((op) => op !== 'none');
  const shared = [types.length === 1 && types[0], ops.length === 1 && ops[0]].filter(Boolean).join(' ');
  return `${r.collective}, ${who}${over}${r.transport === 'tcp' || r.transport === 'ws' ? ` over ${r.transport}` : ''}${shared ? `, ${shared}` : ''}: bus bandwidth`;
}
