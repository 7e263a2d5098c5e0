#!/usr/bin/env node
// The `sluice` command: registers the TypeScript loader (job modules are TypeScript), then runs the
// CLI — from its sources in a checkout of the repository, compiled from `dist/` in an installed package.
import { existsSync } from 'node:fs';
import { register } from 'tsx/esm/api';

register();
const source = new URL('../cli/main.ts', import.meta.url);
await import(existsSync(source) ? source.href : new URL('../dist/cli/main.js', import.meta.url).href);
