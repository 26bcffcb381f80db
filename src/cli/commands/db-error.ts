import type { ExitCode } from '../../errors.js';

/** A failure of an operator command, with its exit code (usage: refused or bad input, serverError: storage). */
export class DbError extends Error {
  constructor(
    message: string,
    readonly exitCode: ExitCode,
  ) {
    super(message);
  }
}
