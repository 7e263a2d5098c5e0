/**
 * `sluiceFunction`: how every function of Sluice is built — Node.js 22 on ARM, bundled locally by
 * esbuild from the project that runs the synth.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Duration } from 'aws-cdk-lib';
import type * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import type { BundlingOptions } from 'aws-cdk-lib/aws-lambda-nodejs';
import type * as logs from 'aws-cdk-lib/aws-logs';
import type { Construct } from 'constructs';
import { REPO_ROOT } from './function-entry.js';

/** Lambda runtime of every function: Node.js 22 (the project pins Node 22 as the Lambda line). */
export const LAMBDA_RUNTIME = lambda.Runtime.NODEJS_22_X;

/**
 * The project the functions are bundled from: this repository, or — where Sluice is an installed
 * package (its folder has no lockfile) — the user's project that runs the synth: the nearest folder
 * up from it that holds a package-lock.json (a workspace's root has the lockfile).
 */
const PROJECT_ROOT = existsSync(join(REPO_ROOT, 'package-lock.json')) ? REPO_ROOT : userProjectRoot(process.cwd());

function userProjectRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package-lock.json'))) return dir;
    if (dirname(dir) === dir) return from;
  }
}

/** esbuild, run locally (never Docker): ESM for Node 22, source maps, the AWS SDK bundled at the pinned versions. */
function bundlingOptions(): BundlingOptions {
  return {
    forceDockerBundling: false,
    format: OutputFormat.ESM,
    target: 'node22',
    mainFields: ['module', 'main'],
    minify: true,
    sourceMap: true,
    sourcesContent: false,
    // The runtime's SDK may be older than the one in package-lock.json: bundle ours.
    externalModules: [],
    // CommonJS dependencies inside an ESM bundle still call require().
    banner: "import { createRequire as __sluiceRequire } from 'node:module'; const require = __sluiceRequire(import.meta.url);",
    ...(existsSync(join(PROJECT_ROOT, 'tsconfig.json')) ? { tsconfig: join(PROJECT_ROOT, 'tsconfig.json') } : {}),
  };
}

/** What differs between Sluice's functions; everything else is set alike by `sluiceFunction`. */
export interface SluiceFunctionProps {
  readonly functionName?: string;
  readonly description: string;
  /** the generated entry module (it exports `handler`) */
  readonly entry: string;
  readonly memorySize: number;
  readonly timeout: Duration;
  readonly role?: iam.IRole;
  readonly logGroup: logs.ILogGroup;
  readonly environment: Record<string, string>;
  readonly reservedConcurrentExecutions?: number;
  /** @default no active tracing */
  readonly tracing?: lambda.Tracing;
  /**
   * The level the function's own logs are written at (POWERTOOLS_LOG_LEVEL). Lambda's platform
   * lines (START, END, REPORT: about 360 bytes an invocation) are INFO events: below DEBUG and
   * INFO they are not sent to CloudWatch Logs at all.
   * @default 'WARN'
   */
  readonly logLevel?: 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
}

/**
 * Lambda's log settings for a function logging at `level`: JSON format (log-level filtering needs
 * it); platform lines only at DEBUG and INFO; application lines at INFO or below, never filtered
 * above it, because the EMF documents carry no level and Lambda counts them as INFO (the
 * function's logger does its own filtering at `level`).
 */
export function lambdaLogging(level: 'DEBUG' | 'INFO' | 'WARN' | 'ERROR' = 'WARN'): Pick<lambda.FunctionProps, 'loggingFormat' | 'systemLogLevelV2' | 'applicationLogLevelV2'> {
  const verbose = level === 'DEBUG' || level === 'INFO';
  return {
    loggingFormat: lambda.LoggingFormat.JSON,
    systemLogLevelV2: verbose ? lambda.SystemLogLevel.INFO : lambda.SystemLogLevel.WARN,
    applicationLogLevelV2: level === 'DEBUG' ? lambda.ApplicationLogLevel.DEBUG : lambda.ApplicationLogLevel.INFO,
  };
}

/** A function of Sluice: Node.js 22 on ARM, bundled from the repository with `bundlingOptions()`. */
export function sluiceFunction(scope: Construct, id: string, props: SluiceFunctionProps): NodejsFunction {
  const { reservedConcurrentExecutions, functionName, role, logLevel, ...rest } = props;
  return new NodejsFunction(scope, id, {
    ...rest,
    ...lambdaLogging(logLevel),
    ...(functionName !== undefined ? { functionName } : {}),
    ...(role !== undefined ? { role } : {}),
    ...(reservedConcurrentExecutions !== undefined ? { reservedConcurrentExecutions } : {}),
    handler: 'handler',
    runtime: LAMBDA_RUNTIME,
    architecture: lambda.Architecture.ARM_64,
    depsLockFilePath: join(PROJECT_ROOT, 'package-lock.json'),
    projectRoot: PROJECT_ROOT,
    bundling: bundlingOptions(),
  });
}
