import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { MessageChannel, type MessagePort, Worker } from 'node:worker_threads';
import type { Quota } from '../quota.js';
import { StorageUnavailableError } from '../storage-errors.js';
import type { Durability } from '../../limits.js';
import {
  type BatchReply,
  type ReplyMessage,
  type WriteMessage,
  type WriteRequest,
  decodeReply,
  encodeRequests,
  receiveError,
} from './sqlite-write-protocol.js';
import { WireEncoder } from './sqlite-wire.js';
import { runWriteMessages } from './sqlite-write-requests.js';
import type { SqliteWriter } from './sqlite-writer.js';

interface PendingWrite {
  request: WriteRequest;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** What the store does with each committed batch: `applied` before its writes are answered, `answered` after. */
export interface CommitHooks {
  applied(reply: BatchReply): void;
  answered(reply: BatchReply): void;
  /** The writer thread failed: every write from now on fails; the server stops (run-server.ts). */
  crashed(error: Error): void;
}

/**
 * How a `new Worker` finds the writer's code: the build's one-file bundle in dist/
 * (scripts/build-bundle.mjs), else tsc's output, or under vitest/tsx the .ts source through tsx.
 */
function startWorker(workerData: Record<string, unknown>, transfer: MessagePort[]): Worker {
  const fromSource = import.meta.url.endsWith('.ts');
  const bundled = new URL('../../sqlite-writer-worker.cjs', import.meta.url);
  if (!fromSource && existsSync(bundled)) return new Worker(bundled, { workerData, transferList: transfer });
  const url = new URL(`./sqlite-writer-worker.${fromSource ? 'ts' : 'js'}`, import.meta.url);
  if (!fromSource) return new Worker(url, { workerData, transferList: transfer });
  // Only when running from source (tests): Node 20 loads no TypeScript in a worker by itself, so
  // the worker registers tsx's hooks first (tsx/esm/api, found beside this file's node_modules).
  const boot = [
    "const { pathToFileURL } = require('node:url');",
    `const tsx = require.resolve('tsx/esm', { paths: [${JSON.stringify(fileURLToPath(url))}] });`,
    "import(pathToFileURL(tsx).href.replace(/index\\.mjs$/, 'api/index.mjs'))",
    `  .then((api) => { api.register(); return import(${JSON.stringify(url.href)}); });`,
  ].join('\n');
  return new Worker(boot, { eval: true, workerData, transferList: transfer });
}

/**
 * The request thread's side of the SQLite writer: writes made in one turn of the event loop go
 * to the writer as one message, and each is answered only after its batch has committed and the
 * store has applied the batch (`CommitHooks.applied`: cache, revisions). On a file the writer is a
 * worker thread with its own connection; ':memory:' has no file another thread could open, so there
 * the same writer runs on this thread, called with the same messages.
 */
export class WriterThread {
  private queued: PendingWrite[] = [];
  /** Posted messages not yet answered, oldest first (the writer answers in order). */
  private readonly inFlight: PendingWrite[][] = [];
  private failure: Error | undefined;
  /** Encodes each turn's message (its buffer reused). */
  private readonly encoder = new WireEncoder();
  private readonly idleWaiters: Array<() => void> = [];
  private closing = false;
  /** The worker and its port once launched; never, when the writer runs on this thread. */
  private thread: { worker: Worker; port: MessagePort; closed: Promise<void> } | undefined;

  private constructor(
    private readonly hooks: CommitHooks,
    /** The writer on this thread (':memory:'), or what a worker needs to open the file. */
    private readonly writer: SqliteWriter | { path: string; durability: Durability; quota: Quota },
  ) {}

  /**
   * The writer thread on a migrated file. `eager`: launched now, loading its code while the server
   * starts (messages posted meanwhile wait in its port); else at the first write (a store opened
   * to read, `kvb db dump`, never starts one).
   */
  static start(options: { path: string; durability: Durability; quota: Quota }, hooks: CommitHooks, eager: boolean): WriterThread {
    const writer = new WriterThread(hooks, options);
    if (eager) writer.launch();
    return writer;
  }

  /** The writer on this thread (':memory:'). */
  static inThread(writer: SqliteWriter, hooks: CommitHooks): WriterThread {
    return new WriterThread(hooks, writer);
  }

  private launch(): { worker: Worker; port: MessagePort } {
    if (this.thread) return this.thread;
    const channel = new MessageChannel();
    const worker = startWorker({ ...this.writer, port: channel.port2 }, [channel.port2]);
    const { port1: port } = channel;
    // Neither keeps the process alive by itself; a write waiting for its answer does (flush).
    worker.unref();
    port.unref();
    let ended: () => void = () => undefined;
    const closed = new Promise<void>((resolve) => (ended = resolve));
    worker.on('error', (error) => this.crashed(error));
    worker.on('exit', (code) => {
      ended();
      if (!this.closing) this.crashed(new Error(`the SQLite writer thread exited (code ${code})`));
    });
    port.on('message', (message: ReplyMessage | 'closed') => {
      if (message === 'closed') ended();
      else this.received(decodeReply(message));
    });
    this.thread = { worker, port, closed };
    return this.thread;
  }

  private post(message: WriteMessage): void {
    if ('conn' in this.writer) this.received(decodeReply(runWriteMessages(this.writer, [message])));
    else {
      const { port } = this.launch();
      // Held while a write waits for its answer: a process with nothing else to do must not end first.
      port.ref();
      // Transferred, not copied: the bytes move to the writer thread.
      port.postMessage(message, [message]);
    }
  }

  /** Queues a write for this turn's message; answered once its batch has committed. */
  submit<T>(request: WriteRequest): Promise<T> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise<T>((resolve, reject) => {
      this.queued.push({ request, resolve: resolve as (value: unknown) => void, reject });
      if (this.queued.length === 1) setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    const batch = this.queued;
    this.queued = [];
    if (batch.length === 0) return;
    if (this.failure) {
      for (const { reject } of batch) reject(this.failure);
      return;
    }
    let message: WriteMessage;
    try {
      message = encodeRequests(
        this.encoder,
        batch.map((p) => p.request),
      );
    } catch (error) {
      // A write that cannot be encoded is a bug; it fails its turn's writes, not the process.
      for (const { reject } of batch) reject(error);
      return;
    }
    this.inFlight.push(batch);
    this.post(message);
  }

  private received(reply: BatchReply): void {
    const writes = this.inFlight.splice(0, reply.messages).flat();
    this.hooks.applied(reply);
    const failed = reply.failed && receiveError(reply.failed);
    for (const [i, { resolve, reject }] of writes.entries()) {
      const outcome = reply.outcomes[i];
      if (failed) reject(failed);
      else if (outcome!.ok) resolve(outcome!.value);
      else reject(receiveError(outcome!.error));
    }
    this.hooks.answered(reply);
    if (this.inFlight.length === 0) this.idle();
  }

  private idle(): void {
    this.thread?.port.unref();
    if (this.queued.length > 0) return;
    for (const waiter of this.idleWaiters.splice(0)) waiter();
  }

  /** The writer thread failed: the writes it held may or may not have committed. */
  private crashed(error: Error): void {
    if (this.failure) return;
    this.failure = new StorageUnavailableError(error, { outcomeUnknown: true });
    for (const { reject } of [...this.inFlight.splice(0).flat(), ...this.queued.splice(0)]) reject(this.failure);
    this.idle();
    this.hooks.crashed(error);
  }

  /** Answers every write already made, then ends the writer (its connection closed). */
  async close(): Promise<void> {
    while ((this.queued.length > 0 || this.inFlight.length > 0) && !this.failure) {
      await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
    }
    this.closing = true;
    if (!this.thread) return;
    const { worker, port, closed } = this.thread;
    if (!this.failure) {
      port.ref();
      port.postMessage('close');
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([closed, new Promise<void>((resolve) => (timer = setTimeout(resolve, 5000)))]);
      clearTimeout(timer);
    }
    port.close();
    await worker.terminate();
  }
}
