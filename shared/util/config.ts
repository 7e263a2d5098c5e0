/** Typed readers for the functions' environment settings; a missing or bad value fails with its name. */
import { ConfigError } from './errors.js';

export function requireEnv(name: string, env: NodeJS.ProcessEnv = process.env): string {
  const v = env[name];
  if (v === undefined || v === '') throw new ConfigError(`environment variable ${name} is not set`);
  return v;
}

export function optionalEnv(name: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const v = env[name];
  return v === undefined || v === '' ? undefined : v;
}
