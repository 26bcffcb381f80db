import { defineCommand, examples } from '../define-command.js';
import { info } from '../output.js';
import { UsageError, asBuffer, withClient } from '../session.js';

/*
 * `kvb edit KEY`: read the value and its revision, open $VISUAL/$EDITOR on it, and write it back
 * with If-Match, so an edit never overwrites a change made meanwhile. Node built-ins and the value
 * helpers are loaded in `run` only.
 */

type EditableType = 'json' | 'text' | 'int64' | 'float64';

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
    const { mkdtemp, readFile, writeFile, rm } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { KvbHttpError } = await import('../../client/client-errors.js');
    await withClient(command, async ({ client, bucket }) => {
      const id = bucket();
      const dir = await mkdtemp(join(tmpdir(), 'kvb-edit-'));
      let keep = false;
      try {
        let current = await client.get(id, key).catch((err: unknown) => {
          // A key that does not exist yet is created, as an editor creates a file: the editor
          // opens empty. Only the key is missing: a missing bucket is still exit 2.
          if (err instanceof KvbHttpError && err.kind === 'not_found' && err.detail === 'no such key') return undefined;
          throw err;
        });
        for (;;) {
          if (current === undefined) {
            const file = join(dir, 'value.txt');
            await writeFile(file, '', { mode: 0o600 });
            await runEditor(file);
            const edited = await readFile(file, 'utf8');
            if (edited === '') {
              info(`${JSON.stringify(key)} does not exist and the file was left empty; nothing created`);
              return;
            }
            let typed: { body: Buffer; contentType?: string };
            try {
              typed = await newValue(edited);
            } catch (err) {
              if (!(err instanceof UsageError)) throw err;
              keep = true;
              throw new InvalidEditError(`${err.message}; your version is in ${file}`);
            }
            try {
              // If-None-Match: * — a key someone else created meanwhile is never overwritten.
              const saved = await client.set(id, key, typed.body, { contentType: typed.contentType, condition: { ifAbsent: true } });
              info(`created${saved.revision !== undefined ? ` (revision ${saved.revision})` : ''}`);
              return;
            } catch (err) {
              if (!(err instanceof KvbHttpError) || err.kind !== 'precondition_failed') throw err;
              keep = true;
              info(`${JSON.stringify(key)} was created while you were editing it; your version is in ${file}`);
              if (!(await ask('Edit the current value instead?'))) throw err;
              current = await client.get(id, key);
              keep = false;
              await rm(file, { force: true });
              continue;
            }
          }
          const type = current.type;
          if (type === 'bytes' || type === undefined) {
            throw new UsageError(
              `${JSON.stringify(key)} holds binary data, which cannot be edited as text; use kvb get ${key} -o FILE and kvb set ${key} --file FILE`,
            );
          }
          const file = join(dir, type === 'json' ? 'value.json' : 'value.txt');
          const original = await editableText(type, asBuffer(current.data));
          await writeFile(file, original, { mode: 0o600 });
          await runEditor(file);
          const edited = await readFile(file, 'utf8');
          if (edited === original) {
            info('unchanged; nothing written');
            return;
          }
          let typed: { body: Buffer; contentType?: string };
          try {
            typed = await editedValue(type, asBuffer(current.data), edited);
          } catch (err) {
            if (!(err instanceof UsageError)) throw err;
            // As on a conflict: the edit is not lost. The file stays for the next attempt.
            keep = true;
            throw new InvalidEditError(`${err.message}; your version is in ${file}`);
          }
          const { body, contentType } = typed;
          try {
            const saved = await client.set(id, key, body, {
              contentType,
              ttl: remainingTtl(current.expiresAt),
              condition: { ifRevision: current.revision },
            });
            info(`saved${saved.revision !== undefined ? ` (revision ${saved.revision})` : ''}`);
            return;
          } catch (err) {
            if (!(err instanceof KvbHttpError) || err.kind !== 'precondition_failed') throw err;
            keep = true;
            info(
              `${JSON.stringify(key)} changed while you were editing it (${err.detail ?? 'precondition failed'}); your version is in ${file}`,
            );
            if (!(await ask('Edit the current value instead?'))) throw err;
            current = await client.get(id, key);
            keep = false;
            await rm(file, { force: true });
          }
        }
      } finally {
        if (!keep) await rm(dir, { recursive: true, force: true });
      }
    });
  },
});
