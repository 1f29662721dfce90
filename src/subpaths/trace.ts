// `webccl/trace`: a job's timeline (WEBCCL_TRACE) and its flight record: user spans and tracks
// beside webccl's own, and the types of what comm.flightRecord() returns. Re-exports of the
// main entry: one module, one state.
export {
  type FlightEntry,
  type FlightState,
  type TraceArgs,
  type TraceTrack,
  traceFlush,
  traceSpan,
  traceTrack,
} from '../index.js';
