import { defineCommand, examples } from '../define-command.js';
import { info } from '../output.js';
import type { KvbHttp, ValueRead } from '../../client/kvb-http.js';
import { UsageError, asBuffer, withClient } from '../session.js';

/*
 * `kvb edit KEY`: read the value and its revision, open $VISUAL/$EDITOR on it, and write it back
 * with If-Match, so an edit never overwrites a change made meanwhile. Node built-ins and the value
 * helpers are loaded only when it runs.
 */

type EditableType = 'json' | 'text' | 'int64' | 'float64';
type TypedBody = { body: Buffer; contentType?: string };

/** The file a person edits: JSON indented (numbers untouched), anything else as its text. */
export async function editableText(type: EditableType, data: Buffer): Promise<string> {
  const text = data.toString('utf8');
  if (type !== 'json') return text;
  const { prettyJson } = await import('../../values/json-source.js');
  return `${prettyJson(text)}\n`;
}

/**
 * What to store from the edited file, checked against the value's type: JSON must parse (and is
 * stored compact), numbers must be numbers of that type; text loses the one trailing newline an
 * editor adds when the value had none.
 */
export async function editedValue(type: EditableType, original: Buffer, edited: string): Promise<{ body: Buffer; contentType?: string }> {
  const { typedBody } = await import('./set.js');
  if (type === 'json') {
    const { isValidJson } = await import('../../values/infer-value.js');
    const { minifyJson } = await import('../../values/json-source.js');
    if (!isValidJson(edited.trim())) throw new InvalidEditError(`the edited value is not valid JSON: ${jsonErrorAt(edited)}`);
    return typedBody(Buffer.from(minifyJson(edited.trim())), 'json');
  }
  if (type === 'text') {
    const text = !original.toString('utf8').endsWith('\n') && edited.endsWith('\n') ? edited.slice(0, -1) : edited;
    return typedBody(Buffer.from(text), 'text');
  }
  return typedBody(Buffer.from(edited.trim()), type === 'int64' ? 'int' : 'float');
}

/**
 * What to store for a new key from its edited file: typed as `kvb set KEY VALUE` types an
 * argument (a number, a JSON object or array, otherwise text), without the one trailing newline an
 * editor adds; JSON is checked and stored compact.
 */
export async function newValue(edited: string): Promise<{ body: Buffer; contentType?: string }> {
  const { argumentType, typedBody } = await import('./set.js');
  const text = edited.endsWith('\n') ? edited.slice(0, -1) : edited;
  const type = argumentType(text.trim());
  if (type === 'json') return editedValue('json', Buffer.alloc(0), text);
  if (type === 'int' || type === 'float') return typedBody(Buffer.from(text.trim()), type);
  return typedBody(Buffer.from(text), 'text');
}

/** An edited file that cannot be saved as its type: the file is kept and named. */
export class InvalidEditError extends UsageError {}

/** Where JSON.parse stops in `text`, as "line L, column C: reason" (1-based, as editors count). */
export function jsonErrorAt(text: string): string {
  try {
    JSON.parse(text);
    return 'valid';
  } catch (err) {
    const message = (err as Error).message;
    const at = /at position (\d+)/.exec(message);
    const position = at ? Number(at[1]) : text.length;
    const before = text.slice(0, position);
    const line = before.split('\n').length;
    const column = position - (before.lastIndexOf('\n') + 1) + 1;
    const reason = message.replace(/ in JSON at position \d+.*$/, '').replace(/^Unexpected end of JSON input$/, 'unexpected end of input');
    return `line ${line}, column ${column}: ${reason}`;
  }
}

/** Seconds left until an RFC 3339 expiry (at least 1), or 0 for a key that never expires. */
export function remainingTtl(expiresAt: string | undefined, now = Date.now()): number {
  if (expiresAt === undefined) return 0;
  return Math.max(1, Math.ceil((Date.parse(expiresAt) - now) / 1000));
}

/** Opens the editor on `file` through the shell, as git does, so EDITOR="code --wait" works. */
async function runEditor(file: string): Promise<void> {
  const { spawnSync } = await import('node:child_process');
  const editor = process.env.VISUAL || process.env.EDITOR || 'vi';
  const result = spawnSync('sh', ['-c', `${editor} "$1"`, 'editor', file], { stdio: 'inherit' });
  if (result.error) throw new UsageError(`cannot run the editor ${JSON.stringify(editor)}: ${result.error.message}`);
  if (result.status !== 0) throw new UsageError(`the editor exited with status ${result.status ?? result.signal}; nothing was written`);
}

/** A yes/no question on the terminal; false when there is no terminal to ask. */
async function ask(question: string): Promise<boolean> {
  if (!process.stdin.isTTY || !process.stderr.isTTY) return false;
  const { createInterface } = await import('node:readline/promises');
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^(y|yes|)$/i.test((await rl.question(`${question} [Y/n] `)).trim());
  } finally {
    rl.close();
  }
}

export const edit = defineCommand({
  define: (parent) =>
    parent
      .command('edit')
      .description('edit a value in $VISUAL or $EDITOR; saved only if nobody changed it meanwhile')
      .argument('<key>', 'the key (holding json, text or a number; a new key is created)')
      .addHelpText(
        'after',
        `
JSON opens indented and is checked (and stored compact) before saving: invalid
JSON is reported with its line and column, and the edited file is kept; numbers
must stay numbers of their type; the expiry is kept. An unchanged file writes
nothing. The save carries If-Match with the revision that was opened: when the
key changed meanwhile, kvb says so, keeps your version in a file and, at a
terminal, offers to edit the fresh value (elsewhere it exits 6). Binary values
are refused: use kvb get KEY -o FILE and kvb set KEY --file FILE.
A key that does not exist opens empty, as an editor opens a new file; saving
creates it (If-None-Match: *, typed as kvb set types an argument, with the
bucket's default TTL); leaving the file empty creates nothing.
${examples('kvb edit config', 'EDITOR=nano kvb edit motd')}`,
      ),
  async run(key, _options, command) {
    const { mkdtemp, rm } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { KvbHttpError } = await import('../../client/client-errors.js');
    await withClient(command, async ({ client, bucket }) => {
      const edit: EditSession = { client, id: bucket(), key, dir: await mkdtemp(join(tmpdir(), 'kvb-edit-')), keep: false };
      try {
        let current: ValueRead | undefined | 'done' = await client.get(edit.id, key).catch((err: unknown) => {
          // A key that does not exist yet is created, as an editor creates a file: the editor
          // opens empty. Only the key is missing: a missing bucket is still exit 2.
          if (err instanceof KvbHttpError && err.kind === 'not_found' && err.detail === 'no such key') return undefined;
          throw err;
        });
        while (current !== 'done') current = current === undefined ? await createRound(edit) : await editRound(edit, current);
      } finally {
        if (!edit.keep) await rm(edit.dir, { recursive: true, force: true });
      }
    });
  },
});

/** One `kvb edit`: the key, the temporary directory, and whether it stays (it holds the person's version). */
interface EditSession {
  client: KvbHttp;
  id: string;
  key: string;
  dir: string;
  keep: boolean;
}

/** Opens the editor on `file` holding `text`; what it holds when the editor exits. */
async function editFile(file: string, text: string): Promise<string> {
  const { readFile, writeFile } = await import('node:fs/promises');
  await writeFile(file, text, { mode: 0o600 });
  await runEditor(file);
  return readFile(file, 'utf8');
}

/** The edited file as a value to store; one that cannot be is refused, and the file kept for the next attempt. */
async function typedOrKept(edit: EditSession, file: string, typing: Promise<TypedBody>): Promise<TypedBody> {
  try {
    return await typing;
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    // As on a conflict: the edit is not lost.
    edit.keep = true;
    throw new InvalidEditError(`${err.message}; your version is in ${file}`);
  }
}

/**
 * A save refused because the key changed meanwhile: the person's version stays in its file and,
 * when they say so at a terminal, the fresh value is edited instead.
 */
async function afterConflict(edit: EditSession, file: string, message: string, err: unknown): Promise<ValueRead> {
  const { rm } = await import('node:fs/promises');
  edit.keep = true;
  info(message);
  if (!(await ask('Edit the current value instead?'))) throw err;
  const current = await edit.client.get(edit.id, edit.key);
  edit.keep = false;
  await rm(file, { force: true });
  return current;
}

/** A key that does not exist: the editor opens empty and saving creates it; the fresh value after a conflict. */
async function createRound(edit: EditSession): Promise<ValueRead | 'done'> {
  const { join } = await import('node:path');
  const { KvbHttpError } = await import('../../client/client-errors.js');
  const { key } = edit;
  const file = join(edit.dir, 'value.txt');
  const edited = await editFile(file, '');
  if (edited === '') {
    info(`${JSON.stringify(key)} does not exist and the file was left empty; nothing created`);
    return 'done';
  }
  const typed = await typedOrKept(edit, file, newValue(edited));
  try {
    // If-None-Match: * — a key someone else created meanwhile is never overwritten.
    const saved = await edit.client.set(edit.id, key, typed.body, { contentType: typed.contentType, condition: { ifAbsent: true } });
    info(`created${saved.revision !== undefined ? ` (revision ${saved.revision})` : ''}`);
    return 'done';
  } catch (err) {
    if (!(err instanceof KvbHttpError) || err.kind !== 'precondition_failed') throw err;
    return afterConflict(edit, file, `${JSON.stringify(key)} was created while you were editing it; your version is in ${file}`, err);
  }
}

/** A key's value edited and saved with If-Match on the revision opened; the fresh value after a conflict. */
async function editRound(edit: EditSession, current: ValueRead): Promise<ValueRead | 'done'> {
  const { join } = await import('node:path');
  const { KvbHttpError } = await import('../../client/client-errors.js');
  const { key } = edit;
  const type = current.type;
  if (type === 'bytes' || type === undefined) {
    throw new UsageError(
      `${JSON.stringify(key)} holds binary data, which cannot be edited as text; use kvb get ${key} -o FILE and kvb set ${key} --file FILE`,
    );
  }
  const file = join(edit.dir, type === 'json' ? 'value.json' : 'value.txt');
  const original = await editableText(type, asBuffer(current.data));
  const edited = await editFile(file, original);
  if (edited === original) {
    info('unchanged; nothing written');
    return 'done';
  }
  const { body, contentType } = await typedOrKept(edit, file, editedValue(type, asBuffer(current.data), edited));
  try {
    const saved = await edit.client.set(edit.id, key, body, {
      contentType,
      ttl: remainingTtl(current.expiresAt),
      condition: { ifRevision: current.revision },
    });
    info(`saved${saved.revision !== undefined ? ` (revision ${saved.revision})` : ''}`);
    return 'done';
  } catch (err) {
    if (!(err instanceof KvbHttpError) || err.kind !== 'precondition_failed') throw err;
    const why = err.detail ?? 'precondition failed';
    return afterConflict(edit, file, `${JSON.stringify(key)} changed while you were editing it (${why}); your version is in ${file}`, err);
  }
}
