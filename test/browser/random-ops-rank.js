// One rank of random-ops.html: runs the seeded random-ops fixture in this Web Worker. The
// fixture is a Node rank script; this lends it what it takes from Node (process.argv and exit,
// setImmediate, console.log's lines) and the options that join the page's node, imports it with
// the package's name pointed at the browser bundle, then reports what it printed and how it ended.
onmessage = async ({ data: { join, mode, args } }) => {
  const lines = [];
  let ended = false;
  const report = (exit, error) => {
    if (ended) return;
    ended = true;
    postMessage({ rank: join.rank, lines, exit, ...(error && { error }) });
  };
  globalThis.randomOpsInit = { ...join, progress: mode };
  globalThis.process = {
    argv: ['browser', 'random-ops.mjs', args],
    env: {},
    // A Node rank ends here; this one reports and then sleeps until the page closes.
    exit: (code) => {
      report(code);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
    },
  };
  globalThis.setImmediate ??= (f) => setTimeout(f, 0);
  const log = console.log;
  console.log = (...a) => {
    lines.push(a.join(' '));
    log(...a);
  };
  try {
    const bundle = new URL('/dist/browser/index.js', location.href).href;
    const text = await (await fetch('/test/system/fixtures/random-ops.mjs')).text();
    const code = text.replace("from 'webccl'", `from '${bundle}'`);
    await import(URL.createObjectURL(new Blob([code], { type: 'text/javascript' })));
    report(0);
  } catch (e) {
    report(1, `${e.code ?? e.name} ${e.message}`);
  }
};
