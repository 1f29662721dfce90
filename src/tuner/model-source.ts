// Which cost model the tuner uses: the file WEBCCL_MODEL names, else the one `webccl tune`
// wrote to its default place (~/.webccl/model.json) when there is one, else the model fitted
// on the machine webccl was built on (default-model.ts). Read once per process; in a browser
// (no file system) always the built-in one.
import { envString } from '../core/config.js';
import { fail } from '../core/errors.js';
import { type CostModel, checkModel } from './cost-model.js';
import { DEFAULT_MODEL } from './default-model.js';

interface NodeFs {
  readFileSync(path: string, enc: 'utf8'): string;
  existsSync(path: string): boolean;
}
interface NodeProcess {
  getBuiltinModule?: (name: string) => unknown;
  env: Record<string, string | undefined>;
}

const nodeProcess = (): NodeProcess | undefined => (globalThis as { process?: NodeProcess }).process;
const fsModule = (): NodeFs | undefined => nodeProcess()?.getBuiltinModule?.('node:fs') as NodeFs | undefined;

/** Where `webccl tune` writes the model by default, and where the tuner looks for one: ~/.webccl/model.json. */
export function defaultModelPath(): string | undefined {
  const p = nodeProcess();
  const home = p?.env.HOME ?? p?.env.USERPROFILE;
  return home ? `${home}/.webccl/model.json` : undefined;
}

function readModel(path: string, from: string): CostModel {
  const fs = fsModule();
  if (!fs) return fail('INVALID_ARGUMENT', `${from}: cannot read ${path} here (no file system)`, { path });
  let text: string;
  try {
    text = fs.readFileSync(path, 'utf8');
  } catch (e) {
    return fail('INVALID_ARGUMENT', `${from}: cannot read ${path}: ${(e as { code?: string }).code ?? String(e)}`, {
      path,
    });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return fail('INVALID_ARGUMENT', `${from}: ${path} is not JSON`, { path });
  }
  return checkModel(json, `${from} ${path}`);
}

let cached: { model: CostModel; from: string; env: string | undefined } | undefined;

/** The model in force and where it came from ('built-in' or a path). */
export function activeModel(): { model: CostModel; from: string } {
  const env = envString('WEBCCL_MODEL');
  if (!cached || cached.env !== env) cached = { ...findModel(env), env };
  return { model: cached.model, from: cached.from };
}

function findModel(env: string | undefined): { model: CostModel; from: string } {
  if (env !== undefined) return { model: readModel(env, 'WEBCCL_MODEL'), from: env };
  const def = defaultModelPath();
  if (def && fsModule()?.existsSync(def)) return { model: readModel(def, 'the tuned model'), from: def };
  return { model: DEFAULT_MODEL, from: 'built-in' };
}
