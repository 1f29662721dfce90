// The Node.js entry: everything the browser build has, plus launching ranks.
export * from './index.js';
export { launch, startRanks, type LaunchOptions, type LaunchResult, type LaunchHandle, type RankFailure } from './launch/threads.js';
export { launchProcesses, startProcesses, type ProcessLaunchOptions, type ProcessLaunchHandle } from './launch/processes.js';
