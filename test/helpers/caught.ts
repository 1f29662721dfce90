// The WebcclError a call throws (the test fails if it throws nothing, or something else).
import { expect } from 'vitest';
import { WebcclError } from '../../src/core/errors.js';

export function caught(fn: () => unknown): WebcclError {
  try {
    fn();
  } catch (e) {
    expect(WebcclError.is(e)).toBe(true);
    return e as WebcclError;
  }
  throw new Error('expected a WebcclError');
}
