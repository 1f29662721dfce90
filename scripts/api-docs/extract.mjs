// The public API as the TypeScript compiler sees it: the entries package.json exports, the
// exports of each, and per symbol its kind, its types and signatures as text, and its TSDoc.
// render.mjs turns what this finds into markdown.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

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
export const FLAGS = ts.TypeFormatFlags.NoTruncation | ts.TypeFormatFlags.UseSingleQuotesForStringLiteralType;
const printer = ts.createPrinter({ removeComments: true });
export const HIDDEN = ts.ModifierFlags.Private | ts.ModifierFlags.Protected;

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

export const hasTag = (node, name) => ts.getJSDocTags(node).some((t) => t.tagName.text === name);
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
export class Context {
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
export function docOf(checker, symbol, sig) {
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
