import { EXIT_CODES } from '../errors.js';

/** A mistake in how the CLI was called, or in its input: exit code 1. */
export class UsageError extends Error {
  readonly exitCode = EXIT_CODES.usage;
}
