import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Only one run at a time may switch the HA cluster over (the failover test's postgres and pgbouncer
 * projects, and the robustness suite's ha2-* scenarios): a lock directory in KVB_TEST_HA_DIR
 * holding the owner's pid; a lock whose owner is gone is taken over. Returns its release.
 */
export async function lockCluster(haDir: string, ms: number): Promise<() => void> {
  const lock = join(haDir, 'failover-test.lock');
  const ownerAlive = () => {
    try {
      process.kill(Number(readFileSync(join(lock, 'pid'), 'utf8')), 0);
      return true;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'EPERM';
    }
  };
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, 'pid'), String(process.pid));
      return () => rmSync(lock, { recursive: true, force: true });
    } catch {
      // A lock left by a killed run (no pid file yet means it is being taken right now).
      if (existsSync(join(lock, 'pid')) && !ownerAlive()) rmSync(lock, { recursive: true, force: true });
    }
    if (Date.now() > deadline) throw new Error(`the HA cluster lock was not free within ${ms} ms (another failover run holds it)`);
    // Polling for the lock to be freed (an event), within the deadline above.
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
