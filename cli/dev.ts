/**
 * `sluice dev <job>`: the job running on the emulated AWS stack until Ctrl-C, with a web UI on
 * 127.0.0.1 and the endpoints printed so that `sluice produce`, `checkpoints`, `savepoint`, the AWS
 * CLI and QueryableState can talk to it; the job is redeployed when its module changes.
 */
import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import type { Command } from 'commander';
import { planJob } from '../shared/plan/planner.js';
import type { DevServer } from '../local/dev/server.js';
import type { DevSession } from '../local/dev/session.js';
import { loadJob } from './load-job.js';
import { runInputs } from './run.js';
import { typecheckJob } from './typecheck.js';

interface DevOptions {
  events: string[];
  port: number;
  environments: number;
  interval?: number;
  seed: number;
  typecheck: boolean;
  watch: boolean;
}

const err = (line: string) => process.stderr.write(`${line}\n`);

/** What to paste into another terminal to reach the running job. */
export function describeEndpoints(session: DevSession, jobPath: string, url: string): string {
  const r = session.runner;
  const env = session.env;
  const sourceStreams = r.plan.sources.map((s) => `    source "${s.name}": stream ${r.names.sourceStream(s)}`);
  const sinkNames = r.plan.sinks.flatMap((s) => (s.kind === 'dynamodb-upsert' ? [`    sink "${s.name}": table ${r.names.sinkTable(s)}`] : []));
  const firstSource = r.plan.sources[0];
  return [
    `\nsluice dev: ${r.plan.job} is running (${r.plan.stages.length} stages). Ctrl-C stops it and the emulated stack.`,
    `  web UI: ${url}`,
    `  endpoints (paste into another shell):`,
    ...Object.entries(env).map(([k, v]) => `    export ${k}=${v}`),
    `  resources (prefix ${r.names.prefix}):`,
    ...sourceStreams,
    ...sinkNames,
    `    state table ${r.names.stateTable}, control table ${r.names.controlTable}, bucket ${r.names.bucket}`,
    `  for example:`,
    ...(firstSource ? [`    sluice produce --stream ${r.names.sourceStream(firstSource)} events.jsonl`] : []),
    `    sluice checkpoints ${jobPath} --prefix ${r.names.prefix}`,
    `    sluice savepoint ${jobPath} --prefix ${r.names.prefix}`,
    `    aws kinesis list-streams`,
    '',
  ].join('\n');
}

export function registerDevCommand(program: Command, int: (name: string) => (v: string) => number): void {
  program
    .command('dev')
    .description('run a job on the emulated AWS stack until Ctrl-C, with a live web UI; redeploys when the job file changes')
    .argument('<job>', 'job module (its default export is the job)')
    .option('-e, --events <source=file>', 'JSON-lines file for a source; repeatable; a bare file feeds the first source', (v: string, acc: string[]) => [...acc, v], [] as string[])
    .option('-p, --port <n>', 'port of the web UI on 127.0.0.1 (0: a free one)', int('--port'), 0)
    .option('--environments <n>', 'simulated execution environments per stage', int('--environments'), 3)
    .option('--interval <ms>', 'time between checkpoints (default: the job\'s)', int('--interval'))
    .option('--seed <n>', 'seed of routing and environment recycling', int('--seed'), 1)
    .option('--no-typecheck', 'do not typecheck the job module first')
    .option('--no-watch', 'do not redeploy when the job file changes')
    .action(async (jobPath: string, opts: DevOptions) => {
      if (opts.typecheck) {
        const t = Date.now();
        const errors = typecheckJob(jobPath);
        err(`typechecked ${jobPath} in ${((Date.now() - t) / 1000).toFixed(1)} s`);
        if (errors.length) throw new Error(`${jobPath} does not typecheck (run with --no-typecheck to run it anyway):\n${errors.join('\n')}`);
      }
      const inputs = runInputs(planJob(await loadJob(jobPath)), opts.events);
      const { DevSession } = await import('../local/dev/session.js');
      const { startDevServer } = await import('../local/dev/server.js');
      const t0 = Date.now();
      err('starting the emulated AWS stack and deploying the job…');
      const session = await DevSession.start({
        jobPath,
        load: (version) => loadJob(jobPath, version),
        inputs,
        environments: opts.environments,
        seed: opts.seed,
        ...(opts.interval !== undefined ? { checkpointIntervalMs: opts.interval } : {}),
        progress: (line) => err(line),
      });
      let server: DevServer | undefined;
      let watcher: FSWatcher | undefined;
      let stopping: Promise<void> | undefined;
      const stop = (signal: string) => {
        if (stopping) {
          err(`${signal} again: stopping is under way (emulators are being shut down)`);
          return stopping;
        }
        err(`\n${signal}: stopping the job, the web UI and the emulated stack…`);
        watcher?.close();
        stopping = (async () => {
          await server?.close();
          await session.stop();
          err('stopped; nothing is left running');
        })();
        return stopping;
      };
      const done = new Promise<void>((resolveDone, rejectDone) => {
        for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => void stop(sig).then(resolveDone, rejectDone));
      });
      try {
        server = await startDevServer(session, opts.port);
      } catch (e) {
        await session.stop();
        throw e;
      }
      err(`ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
      console.log(describeEndpoints(session, jobPath, server.url));

      if (opts.watch) {
        // editors often replace the file (rename): watch its directory, not the file
        const file = basename(jobPath);
        let timer: NodeJS.Timeout | undefined;
        watcher = watch(dirname(resolve(jobPath)), (_event, name) => {
          if (name !== file || stopping) return;
          clearTimeout(timer);
          timer = setTimeout(() => {
            void session.redeploy().then(() => {
              if (!stopping) console.log(describeEndpoints(session, jobPath, server!.url));
            });
          }, 300);
        });
      }
      await done;
      // everything this command started is stopped; a helper library's idle service (esbuild's, after
      // a redeploy synthesized a new plan) may still hold the event loop: end here, as Ctrl-C means
      process.exit(0);
    });
}
