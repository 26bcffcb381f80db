/** Everything `kvb serve` can be told, after flags and environment are merged. */
export interface ServerConfig {
  port: number;
  host: string;
  /** SQLite path, `sqlite:` URL, or `postgres://` URL. */
  db: string;
  logLevel: string;
  defaultTtl: number;
  bucketCreationKey: string | undefined;
  requireSecretKey: boolean;
  corsOrigin: string;
  durability: 'normal' | 'full';
  sweepIntervalSeconds: number;
  poolSize: number;
}

export const DEFAULT_SERVER_CONFIG: ServerConfig = {
  port: 8080,
  host: '0.0.0.0',
  db: './kvb.db',
  logLevel: 'info',
  defaultTtl: 604800,
  bucketCreationKey: undefined,
  requireSecretKey: false,
  corsOrigin: '*',
  durability: 'normal',
  sweepIntervalSeconds: 5,
  poolSize: 10,
};
