// Identity from explicit options and from each launcher's environment: every convention, their
// precedence, and every missing or contradictory setting (asserting the code and the variable).
import { describe, expect, it } from 'vitest';
import { type Env, type Identity, resolveIdentity } from '../../src/bootstrap/identity.js';
import { WebcclError } from '../../src/core/errors.js';

function fails(env: Env, explicit?: Partial<Identity>): WebcclError {
  try {
    resolveIdentity(env, explicit);
  } catch (e) {
    expect(WebcclError.is(e)).toBe(true);
    return e as WebcclError;
  }
  throw new Error(`resolveIdentity(${JSON.stringify(env)}) did not throw`);
}

/** Fails with INVALID_ARGUMENT and a message naming every variable in `names`. */
function expectBad(env: Env, names: string[], explicit?: Partial<Identity>): void {
  const e = fails(env, explicit);
  expect(e.code).toBe('INVALID_ARGUMENT');
  for (const n of names) expect(e.message).toContain(n);
}

describe('conventions', () => {
  it('defaults to a one-rank world', () => {
    expect(resolveIdentity({ PATH: '/bin', RANK: '' })).toEqual({
      rank: 0,
      worldSize: 1,
      localRank: 0,
      localWorldSize: 1,
      source: 'default',
    });
    expect(resolveIdentity({ MASTER_ADDR: 'h', MASTER_PORT: '29500' })).toMatchObject({
      source: 'default',
      masterAddr: 'h',
      masterPort: 29500,
    });
  });

  it('reads torchrun', () => {
    const env = {
      RANK: '5',
      WORLD_SIZE: '8',
      LOCAL_RANK: '1',
      LOCAL_WORLD_SIZE: '4',
      MASTER_ADDR: '10.0.0.1',
      MASTER_PORT: '29500',
    };
    expect(resolveIdentity(env)).toEqual({
      rank: 5,
      worldSize: 8,
      localRank: 1,
      localWorldSize: 4,
      masterAddr: '10.0.0.1',
      masterPort: 29500,
      source: 'torchrun',
    });
    expect(resolveIdentity({ RANK: '1', WORLD_SIZE: '2' })).toMatchObject({ localRank: 0, localWorldSize: 1 });
    expect(resolveIdentity({ RANK: '0', WORLD_SIZE: '2', MASTER_ADDR: '[::1]' }).masterAddr).toBe('::1');
  });

  it('reads Open MPI', () => {
    const env = {
      OMPI_COMM_WORLD_RANK: '3',
      OMPI_COMM_WORLD_SIZE: '4',
      OMPI_COMM_WORLD_LOCAL_RANK: '1',
      OMPI_COMM_WORLD_LOCAL_SIZE: '2',
    };
    expect(resolveIdentity(env)).toEqual({ rank: 3, worldSize: 4, localRank: 1, localWorldSize: 2, source: 'openmpi' });
  });

  it('reads MPICH / Hydra, with local ranks when present', () => {
    expect(resolveIdentity({ PMI_RANK: '2', PMI_SIZE: '3' })).toEqual({
      rank: 2,
      worldSize: 3,
      localRank: 0,
      localWorldSize: 1,
      source: 'mpich',
    });
    expect(resolveIdentity({ PMI_RANK: '2', PMI_SIZE: '3', MPI_LOCALRANKID: '0', MPI_LOCALNRANKS: '1' })).toMatchObject(
      { localRank: 0, localWorldSize: 1 },
    );
  });

  it('reads Slurm, with tasks per node in every simple form', () => {
    const base = { SLURM_PROCID: '5', SLURM_NTASKS: '7', SLURM_LOCALID: '1' };
    expect(resolveIdentity({ ...base, SLURM_NTASKS_PER_NODE: '2' })).toEqual({
      rank: 5,
      worldSize: 7,
      localRank: 1,
      localWorldSize: 2,
      source: 'slurm',
    });
    expect(resolveIdentity({ ...base, SLURM_TASKS_PER_NODE: '2(x3)' }).localWorldSize).toBe(2);
    expect(resolveIdentity({ ...base, SLURM_TASKS_PER_NODE: '2(x3),1', SLURM_NODEID: '2' }).localWorldSize).toBe(2);
    expect(
      resolveIdentity({ ...base, SLURM_LOCALID: '0', SLURM_TASKS_PER_NODE: '2(x3),1', SLURM_NODEID: '3' })
        .localWorldSize,
    ).toBe(1);
    // An allocation shell exports SLURM_NTASKS but starts no task: not a Slurm rank.
    expect(resolveIdentity({ SLURM_NTASKS: '4' }).source).toBe('default');
  });
});

describe('precedence', () => {
  it('takes explicit options over every convention, and MASTER_* from the environment', () => {
    const env = {
      RANK: '1',
      WORLD_SIZE: '2',
      OMPI_COMM_WORLD_RANK: '1',
      OMPI_COMM_WORLD_SIZE: '2',
      MASTER_ADDR: 'a',
      MASTER_PORT: '1',
    };
    expect(resolveIdentity(env, { rank: 3, worldSize: 4 })).toEqual({
      rank: 3,
      worldSize: 4,
      localRank: 0,
      localWorldSize: 1,
      masterAddr: 'a',
      masterPort: 1,
      source: 'options',
    });
    expect(resolveIdentity(env, { masterAddr: 'b', masterPort: 2 })).toMatchObject({
      rank: 1,
      source: 'torchrun',
      masterAddr: 'b',
      masterPort: 2,
    });
  });

  it('orders torchrun > Open MPI > MPICH > Slurm', () => {
    const slurm = { SLURM_PROCID: '0', SLURM_NTASKS: '1' };
    const mpich = { ...slurm, PMI_RANK: '1', PMI_SIZE: '2' };
    const ompi = { ...mpich, OMPI_COMM_WORLD_RANK: '1', OMPI_COMM_WORLD_SIZE: '2' };
    expect(resolveIdentity(slurm).source).toBe('slurm');
    expect(resolveIdentity(mpich).source).toBe('mpich');
    expect(resolveIdentity(ompi).source).toBe('openmpi');
    expect(resolveIdentity({ ...ompi, RANK: '1', WORLD_SIZE: '2' }).source).toBe('torchrun');
  });
});

describe('errors name the variable', () => {
  it('refuses missing partners', () => {
    expectBad({ RANK: '0' }, ['RANK', 'WORLD_SIZE']);
    expectBad({ WORLD_SIZE: '2' }, ['RANK']);
    expectBad({ LOCAL_RANK: '0' }, ['LOCAL_RANK', 'RANK']);
    expectBad({ RANK: '0', WORLD_SIZE: '2', LOCAL_RANK: '0' }, ['LOCAL_WORLD_SIZE']);
    expectBad({ OMPI_COMM_WORLD_RANK: '0' }, ['OMPI_COMM_WORLD_SIZE']);
    expectBad({ PMI_SIZE: '2' }, ['PMI_RANK']);
    expectBad({ SLURM_PROCID: '0' }, ['SLURM_NTASKS']);
    expectBad({ SLURM_PROCID: '0', SLURM_NTASKS: '2', SLURM_LOCALID: '0' }, ['SLURM_TASKS_PER_NODE']);
    expectBad({ SLURM_PROCID: '0', SLURM_NTASKS: '3', SLURM_LOCALID: '0', SLURM_TASKS_PER_NODE: '2,1' }, [
      'SLURM_NODEID',
    ]);
    expectBad(
      { SLURM_PROCID: '0', SLURM_NTASKS: '3', SLURM_LOCALID: '0', SLURM_TASKS_PER_NODE: '2,1', SLURM_NODEID: '2' },
      ['SLURM_NODEID'],
    );
    expectBad({}, ['options.worldSize'], { rank: 0 });
    expectBad({}, ['options.localWorldSize'], { rank: 0, worldSize: 2, localRank: 0 });
  });

  it('refuses values out of range', () => {
    expectBad({ RANK: '4', WORLD_SIZE: '4' }, ['RANK=4', 'WORLD_SIZE=4']);
    expectBad({ RANK: '0', WORLD_SIZE: '0' }, ['WORLD_SIZE']);
    expectBad({ RANK: '0', WORLD_SIZE: '4', LOCAL_RANK: '2', LOCAL_WORLD_SIZE: '2' }, [
      'LOCAL_RANK=2',
      'LOCAL_WORLD_SIZE=2',
    ]);
    expectBad({ RANK: '0', WORLD_SIZE: '2', LOCAL_RANK: '0', LOCAL_WORLD_SIZE: '3' }, ['LOCAL_WORLD_SIZE=3']);
    expectBad({ OMPI_COMM_WORLD_RANK: '2', OMPI_COMM_WORLD_SIZE: '2' }, ['OMPI_COMM_WORLD_RANK']);
    expectBad({ SLURM_PROCID: '0', SLURM_NTASKS: '2', SLURM_LOCALID: '1', SLURM_NTASKS_PER_NODE: '1' }, [
      'SLURM_LOCALID',
      'SLURM_NTASKS_PER_NODE',
    ]);
    expectBad({}, ['options.rank'], { rank: 2, worldSize: 2 });
    expectBad({ MASTER_PORT: '0' }, ['MASTER_PORT']);
    expectBad({ MASTER_PORT: '65536' }, ['MASTER_PORT']);
    expectBad({}, ['options.masterPort'], { masterPort: 70000 });
    expectBad({ MASTER_ADDR: 'a b' }, ['MASTER_ADDR']);
  });

  it('refuses non-integers', () => {
    for (const v of ['x', '1.5', '-1', '0x2', '1e3', '99999999999']) expectBad({ RANK: v, WORLD_SIZE: '2' }, ['RANK']);
    expectBad({ RANK: '0', WORLD_SIZE: 'four' }, ['WORLD_SIZE']);
    expectBad({ PMI_RANK: '0', PMI_SIZE: '2', MPI_LOCALRANKID: 'a', MPI_LOCALNRANKS: '1' }, ['MPI_LOCALRANKID']);
    expectBad({ SLURM_PROCID: '0', SLURM_NTASKS: '2', SLURM_LOCALID: '0', SLURM_TASKS_PER_NODE: '2(y2)' }, [
      'SLURM_TASKS_PER_NODE',
    ]);
    expectBad({ MASTER_PORT: 'http' }, ['MASTER_PORT']);
    expectBad({}, ['options.rank'], { rank: 0.5, worldSize: 2 });
    expectBad({}, ['options.worldSize'], { rank: 0, worldSize: -1 });
  });

  it('refuses two launchers that disagree, naming both variables', () => {
    const e = fails({ RANK: '1', WORLD_SIZE: '4', OMPI_COMM_WORLD_RANK: '2', OMPI_COMM_WORLD_SIZE: '4' });
    expect(e.code).toBe('INVALID_ARGUMENT');
    expect(e.message).toContain('RANK=1');
    expect(e.message).toContain('OMPI_COMM_WORLD_RANK=2');
    expectBad({ RANK: '1', WORLD_SIZE: '4', OMPI_COMM_WORLD_RANK: '1', OMPI_COMM_WORLD_SIZE: '2' }, [
      'WORLD_SIZE=4',
      'OMPI_COMM_WORLD_SIZE=2',
    ]);
    expectBad({ OMPI_COMM_WORLD_RANK: '0', OMPI_COMM_WORLD_SIZE: '2', PMI_RANK: '1', PMI_SIZE: '2' }, [
      'OMPI_COMM_WORLD_RANK',
      'PMI_RANK',
    ]);
    // torchrun started by srun on each node: Slurm's task numbers are per node, not per rank.
    expect(resolveIdentity({ RANK: '5', WORLD_SIZE: '8', SLURM_PROCID: '1', SLURM_NTASKS: '2' }).rank).toBe(5);
  });
});
