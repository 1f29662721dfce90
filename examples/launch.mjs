// Starting ranks from code instead of the webccl command.
//   node examples/launch.mjs
import { fileURLToPath } from 'node:url';
import { launch } from 'webccl';

const script = fileURLToPath(new URL('./allreduce.mjs', import.meta.url));
const { exitCode, failure } = await launch({ nranks: 3, script });
console.log(
  `launch: 3 ranks ran allreduce.mjs, exit code ${exitCode}${failure ? `, rank ${failure.rank} failed: ${failure.message}` : ''}`,
);
process.exitCode = exitCode;
