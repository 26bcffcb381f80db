import { chmodSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_URL } from '../client/kvb-http.js';
import { EXIT_CODES } from '../errors.js';

export { DEFAULT_URL };
export const DEFAULT_PROFILE = 'default';

/** One saved connection. `secret_key` is used as the credential when no token is given. */
export interface Profile {
  url?: string;
  bucket?: string;
  secret_key?: string;
  token?: string;
}

export interface ConfigFile {
  profiles: Record<string, Profile>;
  /** The profile used when neither --profile nor KVB_PROFILE names one (`kvb profile use`). */
  current?: string;
}

/** The global flags, as commander gives them. */
export interface GlobalFlags {
  url?: string;
  bucket?: string;
  token?: string;
  profile?: string;
}

export type Source = 'flag' | 'env' | 'profile' | 'default';

/** Where the CLI connects, and with what: flag > env > profile > default, per field. */
export interface Connection {
  url: string;
  bucket: string | undefined;
  token: string | undefined;
  profileName: string;
  /** Whether the profile was found in the config file. */
  profileFound: boolean;
  sources: { url: Source; bucket?: Source; token?: Source };
}

/** `$XDG_CONFIG_HOME/kvb/config.json`, or `~/.config/kvb/config.json`. */
export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME?.startsWith('/') ? env.XDG_CONFIG_HOME : join(homedir(), '.config');
  return join(base, 'kvb', 'config.json');
}

export class ConfigError extends Error {
  readonly exitCode = EXIT_CODES.usage;
}

export function readConfig(path = configPath()): ConfigFile {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { profiles: {} };
    throw new ConfigError(`cannot read ${path}: ${(err as Error).message}`);
  }
  try {
    const parsed = JSON.parse(text) as Partial<ConfigFile>;
    const profiles = parsed.profiles && typeof parsed.profiles === 'object' ? parsed.profiles : {};
    return { ...parsed, profiles };
  } catch {
    throw new ConfigError(`${path} is not valid JSON; fix or remove it`);
  }
}

/**
 * Writes the whole config file with mode 0600: to a temp file in the same directory, then
 * renamed over the old one, so an interrupted write never leaves a half-written file.
 */
export function writeConfig(config: ConfigFile, path = configPath()): void {
  const dir = join(path, '..');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const temp = join(dir, `.config.json.${process.pid}.tmp`);
  try {
    writeFileSync(temp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
    chmodSync(temp, 0o600);
    renameSync(temp, path);
  } catch (err) {
    rmSync(temp, { force: true });
    throw new ConfigError(`cannot write ${path}: ${(err as Error).message}`);
  }
}

/** Adds or replaces one profile, keeping the others. */
export function saveProfile(name: string, profile: Profile, path = configPath()): void {
  const config = readConfig(path);
  config.profiles[name] = profile;
  writeConfig(config, path);
}

/**
 * A server URL as given, made whole: `127.0.0.1:8080` or `kv.example.com` (no scheme, as redis-cli
 * and etcdctl take them) means http://; trailing slashes are dropped.
 */
export function normalizeUrl(url: string): string {
  const whole = /^[a-z][a-z0-9+.-]*:\/\//i.test(url) ? url : `http://${url}`;
  return whole.replace(/\/+$/, '');
}

const nonEmpty = (s: string | undefined) => (s === undefined || s === '' ? undefined : s);

/** Resolves the connection from global flags, the environment and the chosen profile. */
export function resolveConnection(
  flags: GlobalFlags,
  env: NodeJS.ProcessEnv = process.env,
  options: { allowMissingProfile?: boolean } = {},
): Connection {
  const config = readConfig(configPath(env));
  const profileName = nonEmpty(flags.profile) ?? nonEmpty(env.KVB_PROFILE) ?? nonEmpty(config.current) ?? DEFAULT_PROFILE;
  const profileChosen = profileName !== DEFAULT_PROFILE || nonEmpty(flags.profile) !== undefined || nonEmpty(env.KVB_PROFILE) !== undefined;
  const profile = config.profiles[profileName];
  if (!profile && profileChosen && !options.allowMissingProfile) {
    throw new ConfigError(
      `no profile ${JSON.stringify(profileName)} in ${configPath(env)} (create one with kvb init or kvb create-bucket --save)`,
    );
  }
  const pick = (flag: string | undefined, envValue: string | undefined, fromProfile: string | undefined) => {
    if (nonEmpty(flag) !== undefined) return { value: flag, source: 'flag' as const };
    if (nonEmpty(envValue) !== undefined) return { value: envValue, source: 'env' as const };
    if (nonEmpty(fromProfile) !== undefined) return { value: fromProfile, source: 'profile' as const };
    return undefined;
  };
  const url = pick(flags.url, env.KVB_URL, profile?.url);
  const bucket = pick(flags.bucket, env.KVB_BUCKET, profile?.bucket);
  // `--token ""` asks for no credential at all: anonymous, not KVB_TOKEN's or the profile's.
  const token =
    flags.token === ''
      ? { value: undefined, source: 'flag' as const }
      : pick(flags.token, env.KVB_TOKEN, profile?.token ?? profile?.secret_key);
  return {
    url: normalizeUrl(url?.value ?? DEFAULT_URL),
    bucket: bucket?.value,
    token: token?.value,
    profileName,
    profileFound: profile !== undefined,
    sources: { url: url?.source ?? 'default', bucket: bucket?.source, token: token?.source },
  };
}
