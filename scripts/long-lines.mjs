#!/usr/bin/env node
// Lines of at most 120 characters, past what the formatter does: it lays code out at that width
// but leaves comments and literals alone. Comments are rewrapped here at word boundaries. A line
// that holds a long string, template or regular-expression literal may stay longer: an error
// message or a pattern cut into pieces can no longer be found with grep.
//
//   node scripts/long-lines.mjs [--fix] [FILES...]    (default: every tracked source file)
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import ts from 'typescript';

export const MAX_LINE = 120;
/** A literal at least this long exempts its line. */
const LONG_LITERAL = 40;

/** The source files the limit applies to (tracked by git; the generated wasm module excluded). */
export function sourceFiles() {
  const out = execFileSync('git', ['ls-files', 'src', 'assembly', 'test', 'bench', 'scripts', 'examples', '*.ts'], {
    encoding: 'utf8',
  });
  return out.split('\n').filter((f) => /\.(ts|mjs|js)$/.test(f) && !f.endsWith('.generated.ts'));
}

/** `text` cut into pieces of at most `width` characters at spaces (a longer word stands alone). */
function words(text, width) {
  const lines = [];
  let line = '';
  for (const w of text.split(' ')) {
    if (line && line.length + 1 + w.length > width) {
      lines.push(line);
      line = w;
    } else line = line ? `${line} ${w}` : w;
  }
  if (line) lines.push(line);
  return lines;
}

/** A whole-line comment rewrapped to the limit, or null when the line is not one. */
export function wrapComment(line) {
  let m = /^(\s*)(\/\/ ?)(.*)$/.exec(line);
  if (m && !/^\s*\/\/\s*(biome-ignore|@ts-)/.test(line)) {
    const [, indent, mark, text] = m;
    return words(text, MAX_LINE - indent.length - mark.length).map((w) => indent + mark + w);
  }
  m = /^(\s*)\/\*\* (.*) \*\/$/.exec(line);
  if (m) {
    const [, indent, text] = m;
    return [
      `${indent}/**`,
      ...words(text, MAX_LINE - indent.length - 3).map((w) => `${indent} * ${w}`),
      `${indent} */`,
    ];
  }
  m = /^(\s*)(\* )(.*)$/.exec(line);
  if (m) {
    const [, indent, mark, text] = m;
    return words(text, MAX_LINE - indent.length - mark.length).map((w) => indent + mark + w);
  }
  return null;
}

/** The 0-based lines of `text` that hold a literal of LONG_LITERAL characters or more. */
function linesWithLongLiterals(text, file) {
  const kind = file.endsWith('.ts') ? ts.LanguageVariant.Standard : ts.LanguageVariant.Standard;
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, false, kind, text);
  const lineOf = ts.computeLineStarts(text);
  const out = new Set();
  const mark = (start, end) => {
    if (end - start < LONG_LITERAL) return;
    for (let i = ts.computeLineAndCharacterOfPosition(lineOf, start).line; start < end; i++) {
      out.add(i);
      start = lineOf[i + 1] ?? end;
    }
  };
  // A regex is scanned as one only where the scanner is told a slash starts one: after `(`, `,`,
  // `=`, `:`, `[`, `!`, `&`, `|`, `?`, `{`, `}`, `;`, `return` and the start.
  let prev = ts.SyntaxKind.Unknown;
  const regexAfter = new Set([
    ts.SyntaxKind.OpenParenToken,
    ts.SyntaxKind.CommaToken,
    ts.SyntaxKind.EqualsToken,
    ts.SyntaxKind.ColonToken,
    ts.SyntaxKind.OpenBracketToken,
    ts.SyntaxKind.ExclamationToken,
    ts.SyntaxKind.AmpersandAmpersandToken,
    ts.SyntaxKind.BarBarToken,
    ts.SyntaxKind.QuestionToken,
    ts.SyntaxKind.OpenBraceToken,
    ts.SyntaxKind.CloseBraceToken,
    ts.SyntaxKind.SemicolonToken,
    ts.SyntaxKind.ReturnKeyword,
    ts.SyntaxKind.Unknown,
  ]);
  // A template with substitutions counts whole, from its head to its tail: `braces` holds, for
  // each open substitution, the braces opened inside it and the template's start.
  const braces = [];
  for (let t = scanner.scan(); t !== ts.SyntaxKind.EndOfFileToken; t = scanner.scan()) {
    if (t === ts.SyntaxKind.SlashToken && regexAfter.has(prev)) t = scanner.reScanSlashToken();
    if (t === ts.SyntaxKind.OpenBraceToken && braces.length) braces[braces.length - 1].depth++;
    if (t === ts.SyntaxKind.CloseBraceToken && braces.length) {
      const top = braces[braces.length - 1];
      if (top.depth > 0) top.depth--;
      else t = scanner.reScanTemplateToken(false);
    }
    const at = scanner.getTokenStart();
    if (t === ts.SyntaxKind.TemplateHead) braces.push({ depth: 0, start: at });
    else if (t === ts.SyntaxKind.TemplateTail) mark(braces.pop().start, scanner.getTokenEnd());
    else if (
      t === ts.SyntaxKind.StringLiteral ||
      t === ts.SyntaxKind.NoSubstitutionTemplateLiteral ||
      t === ts.SyntaxKind.RegularExpressionLiteral
    )
      mark(at, scanner.getTokenEnd());
    if (t !== ts.SyntaxKind.WhitespaceTrivia && t !== ts.SyntaxKind.NewLineTrivia) prev = t;
  }
  return out;
}

/**
 * A long line of code with a comment after it, as the comment on lines of its own above the code
 * (only where no quote, backtick or slash comes before the comment: it cannot be inside a literal).
 */
function hoistComment(line) {
  const m = /^(\s*)([^'"`/]*[^'"`/\s])\s+\/\/ (.*)$/.exec(line);
  if (!m) return null;
  const [, indent, code, comment] = m;
  return [...wrapComment(`${indent}// ${comment}`), indent + code];
}

/** `text` with its long comment lines rewrapped. */
export function fixText(text) {
  return text
    .split('\n')
    .flatMap((line) => (line.length > MAX_LINE ? (wrapComment(line) ?? hoistComment(line) ?? [line]) : [line]))
    .join('\n');
}

/** The lines of `text` over the limit that no long literal excuses, as "line: length". */
export function longLines(text, file) {
  const excused = linesWithLongLiterals(text, file);
  return text.split('\n').flatMap((l, i) => (l.length > MAX_LINE && !excused.has(i) ? [`${i + 1}: ${l.length}`] : []));
}

if (process.argv[1]?.endsWith('long-lines.mjs')) {
  const fix = process.argv.includes('--fix');
  const named = process.argv.slice(2).filter((a) => !a.startsWith('--'));
  const left = [];
  for (const file of named.length ? named : sourceFiles()) {
    let text = readFileSync(file, 'utf8');
    if (fix) {
      const next = fixText(text);
      if (next !== text) writeFileSync(file, (text = next));
    }
    for (const l of longLines(text, file)) left.push(`${file}:${l} characters`);
  }
  for (const l of left) console.log(l);
  console.log(`long-lines: ${left.length} line(s) over ${MAX_LINE} characters without a long literal`);
  process.exit(left.length ? 1 : 0);
}
