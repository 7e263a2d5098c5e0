#!/usr/bin/env node
// The `sluice` command: registers the TypeScript loader, then runs the CLI (job modules are TypeScript too).
import { register } from 'tsx/esm/api';

register();
await import('../cli/main.ts');
