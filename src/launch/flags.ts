// The one command-line parser of every `webccl` subcommand, on node:util's parseArgs: one-letter
// flags with the value apart or attached as nccl-tests users type them (-n 4, -n4, -b8), long
// ones apart or after = (--ranks 4, --ranks=4), and several spellings of one option (-n,
// --nranks, --nproc-per-node, --nproc_per_node) folded into one key. Each command keeps its own
// error class (so its caller knows whose usage to print) and checks its own values.
import { parseArgs } from 'node:util';

/** A mistake on the command line: the command prints its usage and exits with code 2. */
export class CliUsageError extends Error {
  override readonly name: string = 'CliUsageError';
}

export interface FlagSpec {
  /** Every spelling, without dashes: one letter for a short flag ("n"), else a long one ("nproc-per-node"). */
  names: readonly string[];
  /** A switch (--procs) takes no value; every other flag takes one. */
  switch?: true;
}

export interface ParseFlagsOptions {
  /** The command's own usage error. */
  error: new (
    message: string,
  ) => Error;
  /**
   * The first positional argument ends the flags: it and everything after it are the command's (run's script and its
   * arguments).
   */
  stopAtPositional?: boolean;
  /** An option given twice (under any spelling) is an error; otherwise the last one counts. */
  once?: boolean;
}

export interface ParsedFlags<K extends string> {
  /** What was given: the spelling used (for messages) and the value ('' for a switch). */
  given: Map<K, { flag: string; value: string }>;
  /** -h or --help was among the flags. */
  help: boolean;
  positionals: string[];
  /** With stopAtPositional: the arguments after the first positional. */
  rest: string[];
}

const dashed = (name: string) => (name.length === 1 ? `-${name}` : `--${name}`);

export function parseFlags<K extends string>(
  argv: readonly string[],
  spec: Record<K, FlagSpec>,
  o: ParseFlagsOptions,
): ParsedFlags<K> {
  const keyOf = new Map<string, K>([
    ['-h', 'help' as K],
    ['--help', 'help' as K],
  ]);
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = {
    help: { type: 'boolean', short: 'h' },
  };
  for (const key of Object.keys(spec) as K[]) {
    const s = spec[key];
    for (const name of s.names) {
      keyOf.set(dashed(name), key);
      // parseArgs wants long names as keys; a one-letter key is how it reads a lone -x.
      options[name] = { type: s.switch ? 'boolean' : 'string' };
    }
  }
  const { tokens } = parseArgs({ args: [...argv], options, strict: false, allowPositionals: true, tokens: true });
  const given = new Map<K, { flag: string; value: string }>();
  const positionals: string[] = [];
  let help = false;
  let skip = -1;
  for (const t of tokens) {
    if (t.index === skip) continue;
    if (t.kind === 'option-terminator') continue;
    if (t.kind === 'positional') {
      if (o.stopAtPositional) return { given, help, positionals: [t.value], rest: argv.slice(t.index + 1) };
      positionals.push(t.value);
      continue;
    }
    const key = keyOf.get(t.rawName);
    if (key === undefined) throw new o.error(`unknown option ${t.rawName}`);
    if (key === 'help') {
      help = true;
      continue;
    }
    let value = t.value;
    if (spec[key].switch) {
      // --procs=1 is no spelling of --procs.
      if (value !== undefined) throw new o.error(`unknown option ${t.rawName}=${value}`);
      value = '';
    } else if (value === undefined && t.index + 1 < argv.length) {
      // parseArgs leaves "--group -1" without a value; the value of a flag is the next argument, whatever it looks
      // like.
      value = argv[t.index + 1];
      skip = t.index + 1;
    }
    if (value === undefined) throw new o.error(`${t.rawName} needs a value`);
    if (o.once && given.has(key)) throw new o.error(`${t.rawName} given twice`);
    given.set(key, { flag: t.rawName, value });
  }
  return { given, help, positionals, rest: [] };
}
