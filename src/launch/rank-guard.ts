// Loaded (node --import) into every rank process `webccl run --procs` starts, before the rank's
// script: ends the rank when its launcher ends, whatever the script does (see launcher-pipe.ts).
import { watchLauncher } from '../bootstrap/nodejs/launcher-pipe.js';

watchLauncher();
