// The markdown of the reference: per entry an index of its exports, then each export's heading,
// signature, documentation and public members, with the anchors GitHub gives the headings.
// extract.mjs finds what is documented; this file only lays it out.
import ts from 'typescript';
import { collect, docOf, FLAGS, HIDDEN, hasTag } from './extract.mjs';

const UNDOCUMENTED = '*No documentation comment.*';

/** One line of text (a table cell, a list item). */
const oneLine = (text) => text.replace(/\s*\n\s*/g, ' ').trim();

/** The first sentence of `text`. */
function firstSentence(text) {
  const line = oneLine(text.split(/\n\s*\n/)[0]);
  const m = /^(.*?(?<!\b(?:e\.g|i\.e|etc|vs|cf))[.!?])(?=\s|$)/.exec(line);
  return m ? m[1] : line;
}

/** GitHub's anchor of a heading, numbered after `seen` (shared by the whole page). */
function anchor(heading, seen) {
  const base = heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
  const k = seen.get(base) ?? 0;
  seen.set(base, k + 1);
  return k ? `${base}-${k}` : base;
}

/** The markdown of a documentation: deprecation, summary, parameters, returns, throws, examples. */
function docMarkdown(doc) {
  const out = [];
  const tagged = (name) => doc.tags.filter((t) => t.name === name);
  for (const t of tagged('deprecated')) out.push(`**Deprecated.** ${oneLine(t.text)}`.trim());
  out.push(doc.summary || UNDOCUMENTED);
  if (doc.params.length)
    out.push(['Parameters:', '', ...doc.params.map((p) => `- \`${p.name}\`: ${oneLine(p.text)}`)].join('\n'));
  for (const t of tagged('returns')) out.push(`Returns: ${oneLine(t.text)}`);
  for (const t of tagged('throws')) out.push(`Throws: ${oneLine(t.text)}`);
  for (const t of tagged('example')) {
    const text = t.text.trim();
    out.push(text.startsWith('```') ? `Example:\n\n${text}` : `Example:\n\n\`\`\`ts\n${text}\n\`\`\``);
  }
  return out.join('\n\n');
}

const code = (lines) => ['```ts', ...lines, '```'].join('\n');

/** `decl`'s type parameters as written (`<T>`), or nothing. */
const typeParams = (decl) => (decl.typeParameters ? `<${decl.typeParameters.map((p) => p.getText()).join(', ')}>` : '');

/** Members in the order their class declares them; inherited ones after, in the checker's order. */
function inSourceOrder(members, decl) {
  const place = (m) => {
    const d = (m.declarations ?? []).find((x) => x.parent === decl);
    return d ? d.pos : Number.MAX_SAFE_INTEGER;
  };
  return members.map((m, i) => ({ m, i, at: place(m) })).sort((a, b) => a.at - b.at || a.i - b.i);
}

/** The reference of one export: heading, signature, documentation, and public members. */
function renderExport(cx, item, seen, warn) {
  const { checker } = cx;
  const { name, symbol, kind } = item;
  const decl = symbol.valueDeclaration ?? symbol.declarations[0];
  const heading = `\`${name}\``;
  item.anchor = anchor(heading, seen);
  const out = [`#### ${heading}`];
  const doc = docOf(checker, symbol);
  if (!doc.summary) warn(name);
  if (kind === 'function') {
    const sigs = checker.getTypeOfSymbolAtLocation(symbol, decl).getCallSignatures();
    out.push(code(sigs.map((s) => cx.signature(s, `function ${name}`, decl))));
    out.push(docMarkdown(sigs.length === 1 ? docOf(checker, symbol, sigs[0]) : doc));
  } else if (kind === 'constant') {
    const type = cx.type(cx.written(decl), checker.getTypeOfSymbolAtLocation(symbol, decl), decl, true);
    out.push(code([`const ${name}: ${type}`]));
    out.push(docMarkdown(doc));
  } else if (kind === 'type') {
    // Written as it is, unless derived from a value (`(typeof DTYPES)[number]`): then what it is.
    let derived = false;
    const visit = (n) => {
      derived ||= ts.isTypeQueryNode(n);
      ts.forEachChild(n, visit);
    };
    if (ts.isTypeAliasDeclaration(decl)) visit(decl.type);
    const text =
      derived || !ts.isTypeAliasDeclaration(decl)
        ? checker.typeToString(checker.getDeclaredTypeOfSymbol(symbol), decl, FLAGS | ts.TypeFormatFlags.InTypeAlias)
        : cx.type(decl.type, undefined, decl, true);
    out.push(code([`type ${name}${typeParams(decl)} = ${text}`]));
    out.push(docMarkdown(doc));
  } else if (kind === 'interface') {
    const heritage = (decl.heritageClauses ?? []).map((h) => ` ${h.getText()}`).join('');
    out.push(code([`interface ${name}${typeParams(decl)}${heritage}`]));
    out.push(docMarkdown(doc));
    const type = checker.getDeclaredTypeOfSymbol(symbol);
    const lines = type.getCallSignatures().map((s) => `- \`${cx.signature(s, '', decl)}\``);
    for (const m of checker.getPropertiesOfType(type).filter((x) => cx.shown(x))) {
      const d = cx.memberDoc(m, m.declarations[0].parent);
      const sig = cx
        .memberLines(m, false)
        .map((l) => `\`${oneLine(l)}\``)
        .join(', ');
      lines.push(`- ${sig}${d.summary ? `: ${oneLine(d.summary)}` : ''}`);
    }
    if (lines.length) out.push(['Members:', '', ...lines].join('\n'));
  } else if (kind === 'class') {
    const heritage = (decl.heritageClauses ?? []).map((h) => ` ${h.getText()}`).join('');
    out.push(code([`class ${name}${typeParams(decl)}${heritage}`]));
    out.push(docMarkdown(doc));
    const classType = checker.getTypeOfSymbolAtLocation(symbol, decl);
    for (const sig of classType.getConstructSignatures()) {
      const ctor = sig.getDeclaration();
      if (ctor && (ts.getCombinedModifierFlags(ctor) & HIDDEN || hasTag(ctor, 'internal') || cx.foreign(ctor)))
        continue;
      const h = `\`new ${name}()\``;
      anchor(h, seen);
      const d = ctor ? docOf(checker, symbol, sig) : { summary: '', params: [], tags: [] };
      if (!d.summary) warn(`new ${name}()`);
      out.push(`##### ${h}`, code([cx.signature(sig, `new ${name}`, decl, true)]), docMarkdown(d));
    }
    const statics = checker.getPropertiesOfType(classType).filter((m) => m.name !== 'prototype' && cx.shown(m));
    const instance = checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(symbol)).filter((m) => cx.shown(m));
    for (const [members, isStatic] of [
      [statics, true],
      [instance, false],
    ]) {
      for (const { m } of inSourceOrder(members, decl)) {
        const h = `\`${name}.${m.name}\``;
        anchor(h, seen);
        const d = cx.memberDoc(m, decl);
        if (!d.summary) warn(`${name}.${m.name}`);
        out.push(`##### ${h}`, code(cx.memberLines(m, isStatic)), docMarkdown(d));
      }
    }
  }
  return out.join('\n\n');
}

/** The generated reference: per entry, an index of its exports, then each export documented. */
export function reference(headingsBefore = [], warn = () => {}) {
  const { cx, sections, owner } = collect();
  const seen = new Map();
  for (const h of headingsBefore) anchor(h, seen);
  const rendered = sections.map(({ entry, items }) => {
    anchor(entry.title, seen);
    return { entry, items, docs: items.filter((i) => i.first).map((i) => renderExport(cx, i, seen, warn)) };
  });
  const documented = new Map(rendered.flatMap((s) => s.items.filter((i) => i.first).map((i) => [i.symbol, i])));
  const out = [];
  for (const { entry, items, docs } of rendered) {
    out.push(`### ${entry.title}`);
    const n = `${items.length} export${items.length === 1 ? '' : 's'}`;
    const shared = items.filter((i) => !i.first).length;
    let intro = `\`import { ... } from '${entry.specifier}'\`: ${n}`;
    if (entry.adds) intro = `The Node.js build of \`${entry.specifier}\` exports all of the above, and these ${n}`;
    else if (shared && shared === items.length) intro += ', each the same as the export of that name documented above';
    else if (shared) intro += ` (${shared} of them documented above, under the first entry that exports them)`;
    out.push(`${intro}.`);
    const rows = items.map((i) => {
      const target = documented.get(i.symbol);
      const summary = firstSentence(docOf(cx.checker, i.symbol).summary) || UNDOCUMENTED;
      const also = owner.get(i.symbol) === i.name ? '' : ` (\`${owner.get(i.symbol)}\`)`;
      return `| [\`${i.name}\`](#${target.anchor})${also} | ${i.kind} | ${summary.replaceAll('|', '\\|')} |`;
    });
    out.push(['| export | kind | summary |', '| --- | --- | --- |', ...rows].join('\n'));
    out.push(...docs);
  }
  return out.join('\n\n');
}

/** The headings of `markdown` outside code fences, as written. */
export function headings(markdown) {
  const out = [];
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const m = !fenced && /^#{1,6} (.*)$/.exec(line);
    if (m) out.push(m[1]);
  }
  return out;
}
