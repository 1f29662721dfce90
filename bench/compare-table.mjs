// The side-by-side table of bench/compare (also printed by bench/report from compare's JSON):
// one row per size, busbw (and time) of webccl and of each anchor, and webccl / anchor. A group
// of `compare --tcp` names its transport: shm (webccl shm, Open MPI vader) or tcp (webccl tcp,
// Open MPI tcp, Gloo); older groups hold every system in one table.

const fmtBw = (x) => (x === undefined ? '–' : x >= 1 ? x.toFixed(2) : x >= 0.01 ? x.toFixed(3) : x.toPrecision(2));
const fmtUs = (x) => (x === undefined ? '–' : x >= 1000 ? x.toFixed(0) : x.toFixed(2));
const fmtRatio = (a, b) => (a === undefined || b === undefined || !(b > 0) ? '–' : `${(a / b).toFixed(2)}×`);

/** Markdown for one (collective, rank count) group of a compare run. */
export function compareTable(group, cores, formatSize) {
  const { op, n, systems, transport, title } = group;
  const base = systems.find((s) => s.name.startsWith('webccl')) ?? { label: 'webccl (not run)', short: 'webccl' };
  const anchors = systems.filter((s) => s !== base);
  const out = [];
  const over = n > cores ? ` (${n} ranks on ${cores} cores: oversubscribed)` : '';
  const via = transport === 'tcp' ? ' over TCP loopback' : transport === 'shm' ? ', shared memory' : '';
  out.push(`\n### ${title ?? `${op}, ${n} ranks${via}`}: busbw GB/s (time µs), ratio = webccl / anchor${over}\n`);
  const head = ['size', base.label, ...anchors.flatMap((a) => [a.label, `webccl/${a.short}`])];
  out.push(`| ${head.join(' | ')} |`);
  out.push(`|${head.map(() => '---:').join('|')}|`);
  const sizes = [...new Set(systems.flatMap((s) => (s.rows ?? []).map((r) => r.size)))].sort((a, b) => a - b);
  for (const size of sizes) {
    const at = (s) => s.rows?.find((r) => r.size === size);
    const w = at(base);
    const cell = (r) => (r ? `${fmtBw(r.busbw)} (${fmtUs(r.time_us)})` : '–');
    out.push(
      `| ${[formatSize(size), cell(w), ...anchors.flatMap((a) => [cell(at(a)), fmtRatio(w?.busbw, at(a)?.busbw)])].join(' | ')} |`,
    );
  }
  for (const s of systems) {
    if (s.error) out.push(`\n${s.label}: failed: ${s.error}`);
    if (s.unsupported) out.push(`\n${s.label}: not supported here (${s.unsupported})`);
    const wrong = (s.rows ?? []).reduce((t, r) => t + (r.wrong > 0 ? r.wrong : 0), 0);
    if (wrong) out.push(`\n${s.label}: ${wrong} wrong values`);
  }
  out.push(
    `\nCPU busy before each run (other work on this machine): ${systems.map((s) => `${s.short} ${s.busyBefore ?? '?'}%`).join(', ')}`,
  );
  return out.join('\n');
}

/** Chart lines of one group: one per system/transport. */
export function compareSeries(group) {
  return group.systems
    .filter((s) => s.rows)
    .map((s) => ({ label: s.label, points: s.rows.map((r) => ({ size: r.size, busbw: r.busbw })) }));
}
