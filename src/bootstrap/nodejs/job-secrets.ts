// The job's shared secrets, as a launcher resolves them (Node only): the token every rank proves
// to the rendezvous store, and the job id that keeps two jobs on one master address apart.
// Every node of a job must arrive at the same values without talking to the others first, so
// each comes from the environment, or from something all nodes see alike: for a job confined to
// one machine, a per-user secret file; for the job id, the id the outer launcher gave the job.
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  fstatSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { BlockList, isIP } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { WebcclError } from '../../core/errors.js';

export type Env = Record<string, string | undefined>;

const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6'); // BlockList also matches IPv4-mapped ::ffff:127.x.y.z

/** 127.0.0.0/8, ::1 (also as "[::1]" or IPv4-mapped), and the name localhost. */
export function isLoopback(host: string): boolean {
  const h = host
    .trim()
    .replace(/^\[(.*)\]$/, '$1')
    .toLowerCase();
  if (h === 'localhost') return true;
  const family = isIP(h);
  return family !== 0 && loopback.check(h, family === 6 ? 'ipv6' : 'ipv4');
}

export function randomToken(): string {
  return randomBytes(32).toString('hex');
}

export function randomJobId(): string {
  return `job-${randomBytes(6).toString('hex')}`;
}

/** An environment value, with '' treated as unset. */
function get(env: Env, name: string): string | undefined {
  const v = env[name]?.trim();
  return v ? v : undefined;
}

/**
 * WEBCCL_TOKEN if set; else, when masterAddr is loopback (every rank on this machine, run by this
 * user), the per-user secret in $XDG_RUNTIME_DIR/webccl-token or ~/.webccl/token, created if
 * missing. A job across machines has no such common place, so there the variable is required.
 */
export function resolveToken(env: Env, masterAddr: string): string {
  const t = get(env, 'WEBCCL_TOKEN');
  if (t !== undefined) return t;
  if (!isLoopback(masterAddr)) {
    throw new WebcclError(
      'INVALID_ARGUMENT',
      `WEBCCL_TOKEN must be set (the same value on every node) for a job whose master address ${masterAddr} is not loopback`,
      { variables: ['WEBCCL_TOKEN'] },
    );
  }
  return userToken(env);
}

/** Where the per-user token lives: the runtime dir is per-user and private by definition. */
export function userTokenPath(env: Env): string {
  const run = get(env, 'XDG_RUNTIME_DIR');
  return run ? join(run, 'webccl-token') : join(get(env, 'HOME') ?? homedir(), '.webccl', 'token');
}

function userToken(env: Env): string {
  const path = userTokenPath(env);
  const existing = readPrivate(path);
  if (existing !== undefined) return existing;
  // Write a complete file under a private name, then link it into place: link fails if the name
  // exists, so two launchers racing here both end up with the winner's token, never half a file.
  const dir = join(path, '..');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const tmp = join(dir, `.webccl-token-${process.pid}-${randomBytes(4).toString('hex')}`);
  writeFileSync(tmp, `${randomToken()}\n`, { mode: 0o600, flag: 'wx' });
  try {
    linkSync(tmp, path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  } finally {
    unlinkSync(tmp);
  }
  return readPrivate(path) ?? fail(path, 'vanished while it was being created');
}

/** The token in `path`, undefined if there is no file; refuses a file others could read. */
function readPrivate(path: string): string | undefined {
  let fd: number;
  try {
    // O_NOFOLLOW: a symlink planted here must not make us read (or trust) another file.
    fd = openSync(path, constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  try {
    const st = fstatSync(fd);
    // Windows has no owner/mode bits to check; there the file's ACL is the user's business.
    if (process.platform !== 'win32') {
      if ((st.mode & 0o077) !== 0)
        fail(path, `is accessible by group or others (mode ${(st.mode & 0o777).toString(8)}); run chmod 600 on it`);
      if (process.getuid && st.uid !== process.getuid()) fail(path, `belongs to uid ${st.uid}, not to this user`);
    }
    const token = readFileSync(fd, 'utf8').trim();
    return token || fail(path, 'is empty; delete it to have a new token made');
  } finally {
    closeSync(fd);
  }
}

function fail(path: string, why: string): never {
  throw new WebcclError('INVALID_ARGUMENT', `the webccl token file ${path} ${why} (or set WEBCCL_TOKEN)`, { path });
}

/**
 * WEBCCL_JOB_ID if set; else the id the outer launcher gave this job (torchrun, Open MPI, Slurm
 * step), the same on every node; else `${masterAddr}:${masterPort}`, which two concurrent jobs
 * cannot share anyway.
 */
export function resolveJobId(env: Env, masterAddr: string, masterPort: number): string {
  const slurm = get(env, 'SLURM_JOB_ID');
  const step = get(env, 'SLURM_STEP_ID');
  return (
    get(env, 'WEBCCL_JOB_ID') ??
    get(env, 'TORCHELASTIC_RUN_ID') ??
    get(env, 'OMPI_MCA_ess_base_jobid') ??
    (slurm && (step !== undefined ? `${slurm}.${step}` : slurm)) ??
    `${masterAddr}:${masterPort}`
  );
}
