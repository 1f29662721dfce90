#!/usr/bin/env node
// Regenerates the reference part of docs/api.md (between its api-reference markers) from the
// TSDoc comments of the public API: the entries package.json exports (the main entry, its Node.js
// build, the subpaths), each export's kind, signatures and documentation, and the public members
// of its classes and interfaces. test/package/api-docs.test.ts fails when the page is stale.
//
//   node scripts/docs-api.mjs [--check]
//
// Only the entry files are named here: the exports are found through them, so the page does not
// change when the files behind them move. Members and exports tagged @internal are left out.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
export const PAGE = join(root, 'docs', 'api.md');
const START = '<!-- api-reference:start -->';
const END = '<!-- api-reference:end -->';
const UNDOCUMENTED = '*No documentation comment.*';

/**
 * The public entries, in package.json's order: import specifier, title and source file. An entry
 * whose Node.js build declares other types (the main entry) adds a second one for that build.
 */
export function entries() {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const source = (types) => types.replace(/^\.\/dist\/types\//, 'src/').replace(/\.d\.ts$/, '.ts');
  const out = [];
  for (const [key, conditions] of Object.entries(pkg.exports)) {
    const types = conditions?.default?.types;
    if (!types) continue;
    const specifier = key === '.' ? pkg.name : `${pkg.name}/${key.slice(2)}`;
    out.push({ specifier, title: `\`${specifier}\``, file: source(types) });
    const nodeTypes = conditions.node?.import?.types;
    if (nodeTypes && nodeTypes !== types)
      out.push({ specifier, title: `\`${specifier}\` in Node.js`, file: source(nodeTypes), adds: true });
  }
  return out;
}

const KINDS = ['function', 'class', 'constant', 'interface', 'type'];
const FLAGS = ts.TypeFormatFlags.NoTruncation | ts.TypeFormatFlags.UseSingleQuotesForStringLiteralType;
const printer = ts.createPrinter({ removeComments: true });
const HIDDEN = ts.ModifierFlags.Private | ts.ModifierFlags.Protected;

/** Markdown of TSDoc display parts: `{@link X}` as code, `<tag>` escaped, the rest as written. */
function partsText(parts = []) {
  let out = '';
  let link = '';
  for (const p of parts) {
    if (p.kind === 'link') {
      if (p.text === '}') out += `\`${link.trim()}\``;
      link = '';
    } else if (p.kind === 'linkName' || p.kind === 'linkText') link += p.text;
    else out += p.text;
  }
  return out
    .trim()
    .split(/(```[\s\S]*?```|`[^`\n]*`)/)
    .map((piece, i) => (i % 2 ? piece : piece.replace(/<(?=[A-Za-z/])/g, '&lt;')))
    .join('');
}

/** Paragraphs kept, the lines inside each joined (a wrapped comment line is no list or heading). */
function paragraphs(text) {
  const out = [];
  let fence = false;
  let para = [];
  const flush = () => {
    if (para.length) out.push(para.join(' '), '');
    para = [];
  };
  for (const raw of text.split('\n')) {
    if (raw.trim().startsWith('```')) {
      flush();
      fence = !fence;
      out.push(raw.trim());
      if (!fence) out.push('');
    } else if (fence) out.push(raw);
    else if (!raw.trim()) flush();
    else para.push(raw.trim());
  }
  flush();
  return out.join('\n').trim();
}

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

const hasTag = (node, name) => ts.getJSDocTags(node).some((t) => t.tagName.text === name);
const isInternal = (symbol) => (symbol.declarations ?? []).some((d) => hasTag(d, 'internal'));

/** What an export is: a function (or a constant holding one), class, constant, interface or type. */
function kindOf(symbol) {
  const f = symbol.flags;
  if (f & ts.SymbolFlags.Class) return 'class';
  if (f & ts.SymbolFlags.Function) return 'function';
  if (f & ts.SymbolFlags.Variable) {
    const decl = symbol.valueDeclaration;
    const init = decl && ts.isVariableDeclaration(decl) ? decl.initializer : undefined;
    return init && (ts.isArrowFunction(init) || ts.isFunctionExpression(init)) ? 'function' : 'constant';
  }
  if (f & ts.SymbolFlags.Interface) return 'interface';
  return 'type';
}

/** What the rendering needs: the checker, the public symbols, which files are the library's own. */
class Context {
  constructor(program, publicSymbols) {
    this.program = program;
    this.checker = program.getTypeChecker();
    this.publicSymbols = publicSymbols;
  }

  /** Whether `node` is declared outside the project (TypeScript's lib, node_modules). */
  foreign(node) {
    const sf = node.getSourceFile();
    return (
      this.program.isSourceFileDefaultLibrary(sf) ||
      this.program.isSourceFileFromExternalLibrary(sf) ||
      /[\\/]node_modules[\\/]/.test(sf.fileName)
    );
  }

  /** Whether `typeNode` names a type alias of the project that the entries do not export. */
  namesHiddenAlias(typeNode) {
    let hidden = false;
    const visit = (n) => {
      if (ts.isTypeReferenceNode(n)) {
        let s = this.checker.getSymbolAtLocation(n.typeName);
        if (s && s.flags & ts.SymbolFlags.Alias) s = this.checker.getAliasedSymbol(s);
        const alias = s && s.flags & ts.SymbolFlags.TypeAlias;
        if (alias && !this.publicSymbols.has(s) && !(s.declarations ?? []).some((d) => this.foreign(d))) hidden = true;
      }
      ts.forEachChild(n, visit);
    };
    visit(typeNode);
    return hidden;
  }

  /**
   * A type as text: as the declaration writes it (`typeNode`), else as the checker infers it
   * (`type`). An alias the entries do not export is shown as what it stands for, since a reader
   * cannot look it up. Object types go on several lines when `multiline`.
   */
  type(typeNode, type, node, multiline = false) {
    const flat = (text) => (multiline ? text.replace(/ {4}/g, '  ') : text.replace(/\s*\n\s*/g, ' '));
    if (typeNode && !this.namesHiddenAlias(typeNode))
      return flat(printer.printNode(ts.EmitHint.Unspecified, typeNode, typeNode.getSourceFile()));
    const resolved = typeNode ? this.checker.getTypeFromTypeNode(typeNode) : type;
    const flags = FLAGS | (typeNode ? ts.TypeFormatFlags.InTypeAlias : 0);
    const synthesized = this.checker.typeToTypeNode(resolved, node, flags | ts.TypeFormatFlags.MultilineObjectLiterals);
    if (!synthesized) return this.checker.typeToString(resolved, node, flags);
    return flat(printer.printNode(ts.EmitHint.Unspecified, synthesized, node.getSourceFile()));
  }

  /** The written type of a declaration with one (a parameter, property, variable). */
  written(decl) {
    return decl && 'type' in decl && decl.type ? decl.type : undefined;
  }

  /** A signature as text after `prefix` (a name, `new X`, `function f`); without its return type for `bare`. */
  signature(sig, prefix, node, bare = false) {
    const decl = sig.getDeclaration();
    const typeParams = decl?.typeParameters ? `<${decl.typeParameters.map((p) => p.getText()).join(', ')}>` : '';
    const params = sig.parameters.map((p) => {
      const d = p.valueDeclaration;
      const rest = d?.dotDotDotToken ? '...' : '';
      const optional = d && (d.questionToken || d.initializer) ? '?' : '';
      const inferred = this.checker.getTypeOfSymbolAtLocation(p, d ?? node);
      const type = this.type(this.written(d), optional ? this.checker.getNonNullableType(inferred) : inferred, node);
      return `${rest}${p.name}${optional}: ${type}`;
    });
    if (bare) return `${prefix}${typeParams}(${params.join(', ')})`;
    const returns = this.type(decl?.type, this.checker.getReturnTypeOfSignature(sig), node);
    return `${prefix}${typeParams}(${params.join(', ')}): ${returns}`;
  }

  /** The types a class or interface extends or implements. */
  bases(decl) {
    return (decl.heritageClauses ?? []).flatMap((h) => h.types.map((t) => this.checker.getTypeAtLocation(t)));
  }

  /**
   * The documentation of a member: its own comment, else one it inherits from a type of the
   * project that it implements (not TypeScript's lib: PromiseLike's `then` documents a Promise).
   */
  memberDoc(member, owner) {
    const own = (member.declarations ?? []).some((d) => ts.getJSDocCommentsAndTags(d).length);
    if (own || !owner) return docOf(this.checker, member);
    for (const base of this.bases(owner)) {
      const inherited = this.checker.getPropertyOfType(base, member.name);
      if (inherited && inherited !== member && !(inherited.declarations ?? []).some((d) => this.foreign(d))) {
        const doc = this.memberDoc(inherited, inherited.declarations?.[0]?.parent);
        if (doc.summary) return doc;
      }
    }
    return { summary: '', params: [], tags: [] };
  }

  /** Whether a member is part of the API: public, named, not @internal, declared by the project. */
  shown(member) {
    if (member.name.startsWith('#') || member.name.startsWith('__@') || isInternal(member)) return false;
    const decls = member.declarations ?? [];
    return decls.length > 0 && decls.every((d) => !(ts.getCombinedModifierFlags(d) & HIDDEN) && !this.foreign(d));
  }

  /** Signature lines of a member (property, accessor or method). */
  memberLines(member, isStatic) {
    const decl = member.valueDeclaration ?? member.declarations[0];
    const prefix = isStatic ? 'static ' : '';
    if (member.flags & ts.SymbolFlags.Method) {
      const sigs = this.checker.getTypeOfSymbolAtLocation(member, decl).getCallSignatures();
      return sigs.map((s) => this.signature(s, `${prefix}${member.name}`, decl));
    }
    const decls = member.declarations ?? [];
    const getterOnly = member.flags & ts.SymbolFlags.GetAccessor && !(member.flags & ts.SymbolFlags.SetAccessor);
    const readonly = getterOnly || decls.some((d) => ts.getCombinedModifierFlags(d) & ts.ModifierFlags.Readonly);
    const optional = member.flags & ts.SymbolFlags.Optional ? '?' : '';
    const getter = decls.find(ts.isGetAccessorDeclaration);
    const typeNode = getter ? getter.type : this.written(decl);
    const inferred = this.checker.getTypeOfSymbolAtLocation(member, decl);
    const type = this.type(typeNode, optional ? this.checker.getNonNullableType(inferred) : inferred, decl, true);
    return [`${prefix}${readonly ? 'readonly ' : ''}${member.name}${optional}: ${type}`];
  }
}

/** The documentation of `symbol` (or of one signature): summary, then its tags. */
function docOf(checker, symbol, sig) {
  const owner = sig ?? symbol;
  let summary = partsText(owner.getDocumentationComment(checker));
  let tags = owner.getJsDocTags(checker);
  if (sig && !summary && !tags.length) {
    summary = partsText(symbol.getDocumentationComment(checker));
    tags = symbol.getJsDocTags(checker);
  }
  const params = [];
  const rest = [];
  for (const t of tags) {
    const parts = t.text ?? [];
    if (t.name === 'param') {
      const name = parts.find((p) => p.kind === 'parameterName')?.text ?? '';
      const text = partsText(parts.filter((p) => p.kind !== 'parameterName'));
      params.push({ name, text: text.replace(/^-\s*/, '') });
    } else rest.push({ name: t.name === 'return' ? 'returns' : t.name, text: partsText(parts) });
  }
  return { summary: paragraphs(summary), params, tags: rest };
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

/** The exports of each entry, each symbol documented under the first entry that exports it. */
export function collect() {
  const list = entries();
  const { config } = ts.readConfigFile(join(root, 'tsconfig.json'), ts.sys.readFile);
  const { options } = ts.parseJsonConfigFileContent(config, ts.sys, root);
  const program = ts.createProgram(
    list.map((e) => join(root, e.file)),
    { ...options, noEmit: true },
  );
  const checker = program.getTypeChecker();
  const owner = new Map();
  const sections = [];
  const names = new Map();
  for (const entry of list) {
    const sf = program.getSourceFile(join(root, entry.file));
    if (!sf) throw new Error(`docs-api: no entry file ${entry.file}`);
    const before = names.get(entry.specifier) ?? new Set();
    const items = [];
    for (const exp of checker.getExportsOfModule(checker.getSymbolAtLocation(sf))) {
      if (entry.adds && before.has(exp.name)) continue;
      const symbol = exp.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exp) : exp;
      if (isInternal(symbol)) continue;
      const first = !owner.has(symbol);
      if (first) owner.set(symbol, exp.name);
      items.push({ name: exp.name, symbol, kind: kindOf(symbol), first });
    }
    items.sort((a, b) => KINDS.indexOf(a.kind) - KINDS.indexOf(b.kind) || a.name.localeCompare(b.name, 'en'));
    names.set(entry.specifier, new Set([...before, ...items.map((i) => i.name)]));
    sections.push({ entry, items });
  }
  return { cx: new Context(program, new Set(owner.keys())), sections, owner };
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
function headings(markdown) {
  const out = [];
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const m = !fenced && /^#{1,6} (.*)$/.exec(line);
    if (m) out.push(m[1]);
  }
  return out;
}

/** `page` with its generated region rewritten. */
export function regenerate(page, warn) {
  const a = page.indexOf(START);
  const b = page.indexOf(END);
  if (a < 0 || b < a) throw new Error(`docs/api.md: no ${START} ... ${END} region`);
  const ref = reference(headings(page.slice(0, a)), warn);
  if (ref.includes(root) || /import\(["'][./]/.test(ref)) throw new Error('docs-api: a file path leaked into the page');
  return `${page.slice(0, a + START.length)}\n\n${ref}\n\n${page.slice(b)}`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const check = process.argv.includes('--check');
  const undocumented = [];
  const page = readFileSync(PAGE, 'utf8');
  const next = regenerate(page, (name) => undocumented.push(name));
  if (!check) for (const name of undocumented) console.warn(`docs-api: ${name} has no documentation comment`);
  if (check) {
    if (next !== page) {
      console.error('docs/api.md: the reference differs from the TSDoc of the public API (run npm run docs:api)');
      process.exit(1);
    }
  } else if (next !== page) {
    writeFileSync(PAGE, next);
    console.log('docs/api.md: reference regenerated');
  }
}
