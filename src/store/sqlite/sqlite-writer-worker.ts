/**
 * The SQLite writer's thread (started by sqlite-writer-thread.ts): its own connection to the
 * server's file, on which it runs every write. The request thread posts one message per turn of its
 * event loop; this thread takes every message already waiting and commits them as one
 * transaction, so while it commits and syncs one batch the next one gathers on the other side.
 */
import { type MessagePort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import type { Quota } from '../quota.js';
import { SqliteConnection } from './sqlite-connection.js';
import type { Durability } from '../../limits.js';
import { openWriteConnection } from './sqlite-settings.js';
import type { WriteMessage } from './sqlite-write-protocol.js';
import { runWriteMessages } from './sqlite-write-requests.js';
import { SqliteWriter } from './sqlite-writer.js';

const { path, durability, quota, port } = workerData as { path: string; durability: Durability; quota: Quota; port: MessagePort };

/**
 * Test hook, never set in use: the thread throws once it has committed this many batches, as a
 * bug in it would (test/reliability/writer-crash.test.ts checks that the server stops).
 */
const crashAfter = Number(process.env.KVB_TEST_WRITER_CRASH_AFTER ?? 'NaN');
let batches = 0;

const raw = openWriteConnection(path, durability);
const writer = new SqliteWriter(new SqliteConnection(raw), quota);

port.on('message', (first: WriteMessage | 'close') => {
  if (first === 'close') {
    raw.close();
    port.postMessage('closed');
    port.close();
    return;
  }
  const messages = [first];
  // A 'close' is posted only after every write has been answered: none waits behind the batch.
  for (let next = receiveMessageOnPort(port); next; next = receiveMessageOnPort(port)) messages.push(next.message as WriteMessage);
  const reply = runWriteMessages(writer, messages);
  // Committed but never answered: the request thread must report these writes' outcome as unknown.
  if (++batches >= crashAfter) throw new Error(`KVB_TEST_WRITER_CRASH_AFTER=${crashAfter}: the writer thread fails on purpose`);
  port.postMessage(reply, [reply]);
});
