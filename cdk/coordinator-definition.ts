/**
 * The coordinator workflow as plain ASL JSON, taken from the synthesized stack, for the local runner
 * (docs/architecture.md): it executes *this* definition in an ASL interpreter, so the loop that runs locally is
 * the loop that deploys.
 *
 * The stack is synthesized in memory with cdk.json's context and bundling skipped (no esbuild run),
 * into a scratch folder under cdk.out/ that is removed afterwards. The template's `DefinitionString` is an
 * `Fn::Join` of text and tokens; each token is replaced by the value it would take in one account
 * and region: `Ref AWS::Partition|Region|AccountId|URLSuffix` by the given values, and
 * `Fn::GetAtt [<function>, Arn]` by `arn:<partition>:lambda:<region>:<account>:function:<name>`, `Ref` of a
 * state machine by its ARN and of a table by its name.
 * Anything else is an error that names the token, rather than a silently wrong definition.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import type { Job } from '../shared/api/job.js';
import { REPO_ROOT } from './function-entry.js';
import { SluiceJobStack, stackIdFor } from './sluice-job.js';

/** Which local handler a function name stands for. */
export type FunctionHandlerRef = { readonly kind: 'coordinator' } | { readonly kind: 'operator'; readonly stageId: string };

export interface CoordinatorDefinitionOptions {
  /** resource prefix; @default the construct's default, `sluice-<job>` */
  readonly prefix?: string;
  /** @default 'us-east-1' */
  readonly region?: string;
  /** @default '000000000000' */
  readonly account?: string;
  /** @default 'aws' */
  readonly partition?: string;
  /** the job's module file, if known (only written into the unused entry files); @default a placeholder */
  readonly jobModule?: string;
  /**
   * checkpoints in Express rounds (SluiceJob `expressCheckpoints`). Explicit here, unlike SluiceJob's
   * default (rounds where allowed): local runs take the Standard loop unless asked (`expressCheckpoints`
   * of LocalRunOptions); @default false
   */
  readonly expressCheckpoints?: boolean;
}

export interface CoordinatorDefinition {
  /** the ASL definition, every token resolved */
  readonly definition: AslDefinition;
  readonly stateMachineName: string;
  readonly stateMachineArn: string;
  /** with `expressCheckpoints`: the Express workflow the Standard one starts a round of checkpoints in */
  readonly rounds?: { readonly definition: AslDefinition; readonly stateMachineArn: string };
  readonly coordinatorFunctionName: string;
  readonly coordinatorFunctionArn: string;
  /** every function of the job by physical name: the coordinator and one operator function per stage */
  readonly functionNameToHandler: Readonly<Record<string, FunctionHandlerRef>>;
  /** the same, keyed by function ARN (Task states name functions by ARN) */
  readonly functionArnToHandler: Readonly<Record<string, FunctionHandlerRef>>;
}

/** An Amazon States Language document (top level only is typed). */
export interface AslDefinition {
  readonly StartAt: string;
  readonly States: Record<string, Record<string, unknown>>;
  readonly Comment?: string;
  readonly [key: string]: unknown;
}

type CfnValue = string | number | boolean | null | CfnValue[] | { [key: string]: CfnValue };

/** The context `cdk.json` gives the app, so tests and this module synthesize the template `cdk synth` does. */
export function cdkJsonContext(): Record<string, unknown> {
  const cdkJson = JSON.parse(readFileSync(join(REPO_ROOT, 'cdk.json'), 'utf8')) as { context?: Record<string, unknown> };
  return { ...(cdkJson.context ?? {}) };
}

/** An App with cdk.json's context; `bundle: false` skips esbuild (`aws:cdk:bundling-stacks: []`). */
export function newApp(options: { bundle?: boolean; outdir?: string; context?: Record<string, unknown> } = {}): App {
  return new App({
    context: {
      ...cdkJsonContext(),
      ...(options.bundle === false ? { 'aws:cdk:bundling-stacks': [] } : {}),
      ...(options.context ?? {}),
    },
    ...(options.outdir ? { outdir: options.outdir } : {}),
  });
}

export function coordinatorDefinition(job: Job, options: CoordinatorDefinitionOptions = {}): CoordinatorDefinition {
  const region = options.region ?? 'us-east-1';
  const account = options.account ?? '000000000000';
  const partition = options.partition ?? 'aws';
  // Lambda entries must sit under the project root (NodejsFunction checks), so the scratch folder
  // is inside cdk.out/ rather than the OS temp folder; it is unique, so parallel runs do not collide.
  const scratchRoot = join(REPO_ROOT, 'cdk.out');
  mkdirSync(scratchRoot, { recursive: true });
  const work = mkdtempSync(join(scratchRoot, '.sluice-asl-'));
  try {
    const app = newApp({ bundle: false, outdir: join(work, 'cdk.out') });
    const stackId = stackIdFor(job.name);
    const stack = new SluiceJobStack(app, stackId, {
      job,
      jobModule: options.jobModule ?? join(work, 'job-module-not-given.ts'),
      entriesDir: join(work, 'entries'),
      ...(options.prefix !== undefined ? { prefix: options.prefix } : {}),
      expressCheckpoints: options.expressCheckpoints ?? false,
    });
    const sluice = stack.job;
    const assembly = app.synth();
    const template = assembly.getStackArtifact(stack.artifactId).template as {
      Resources: Record<string, { Type: string; Properties?: Record<string, CfnValue> }>;
    };

    const functionArn = (name: string) => `arn:${partition}:lambda:${region}:${account}:function:${name}`;
    const logicalToFunctionName = new Map<string, string>();
    const logicalToTableName = new Map<string, string>();
    const stateMachines: Array<{ id: string; props: Record<string, CfnValue> }> = [];
    for (const [id, res] of Object.entries(template.Resources)) {
      if (res.Type === 'AWS::Lambda::Function' && typeof res.Properties?.FunctionName === 'string') {
        logicalToFunctionName.set(id, res.Properties.FunctionName);
      }
      if (res.Type === 'AWS::StepFunctions::StateMachine') stateMachines.push({ id, props: res.Properties ?? {} });
      // `Ref` of a table is its name (the rounds read the control table)
      if (res.Type === 'AWS::DynamoDB::Table' && typeof res.Properties?.TableName === 'string') logicalToTableName.set(id, res.Properties.TableName);
    }
    const sm = stateMachines.find((s) => s.props.StateMachineName === sluice.names.stateMachine);
    if (!sm) throw new Error(`the synthesized stack has no state machine named ${sluice.names.stateMachine}`);
    const stateMachineArn = (name: string) => `arn:${partition}:states:${region}:${account}:stateMachine:${name}`;
    // `Ref` of a state machine is its ARN
    const logicalToStateMachineArn = new Map(stateMachines.flatMap((m) => (typeof m.props.StateMachineName === 'string' ? [[m.id, stateMachineArn(m.props.StateMachineName)] as const] : [])));

    const pseudo: Record<string, string> = {
      'AWS::Partition': partition,
      'AWS::Region': region,
      'AWS::AccountId': account,
      'AWS::URLSuffix': 'amazonaws.com',
    };
    const resolveToken = (token: CfnValue): string => {
      if (typeof token === 'string') return token;
      if (token && typeof token === 'object' && !Array.isArray(token)) {
        const ref = token.Ref;
        if (typeof ref === 'string' && ref in pseudo) return pseudo[ref]!;
        if (typeof ref === 'string' && logicalToStateMachineArn.has(ref)) return logicalToStateMachineArn.get(ref)!;
        if (typeof ref === 'string' && logicalToTableName.has(ref)) return logicalToTableName.get(ref)!;
        const getAtt = token['Fn::GetAtt'];
        if (Array.isArray(getAtt) && getAtt[1] === 'Arn' && typeof getAtt[0] === 'string') {
          const fnName = logicalToFunctionName.get(getAtt[0]);
          if (fnName) return functionArn(fnName);
        }
      }
      throw new Error(`coordinatorDefinition cannot resolve the token ${JSON.stringify(token)} in the state machine's definition`);
    };
    const definitionOf = (body: CfnValue | undefined): AslDefinition => {
      if (typeof body === 'string') return JSON.parse(body) as AslDefinition;
      const join = body && typeof body === 'object' && !Array.isArray(body) ? body['Fn::Join'] : undefined;
      if (!Array.isArray(join) || join[0] !== '' || !Array.isArray(join[1])) {
        throw new Error(`unexpected DefinitionString shape: ${JSON.stringify(body).slice(0, 200)}`);
      }
      return JSON.parse(join[1].map(resolveToken).join('')) as AslDefinition;
    };
    const definition = definitionOf(sm.props.DefinitionString);
    const roundsName = sluice.coordinator.rounds ? `${sluice.names.stateMachine}-rounds` : undefined;
    const roundsSm = roundsName ? stateMachines.find((m) => m.props.StateMachineName === roundsName) : undefined;
    if (roundsName && !roundsSm) throw new Error(`the synthesized stack has no state machine named ${roundsName}`);

    const functionNameToHandler: Record<string, FunctionHandlerRef> = {
      [sluice.names.coordinatorFunction]: { kind: 'coordinator' },
    };
    for (const stage of sluice.plan.stages) functionNameToHandler[sluice.names.functionOf(stage)] = { kind: 'operator', stageId: stage.id };
    const functionArnToHandler = Object.fromEntries(
      Object.entries(functionNameToHandler).map(([name, ref]) => [functionArn(name), ref]),
    );
    return {
      definition,
      stateMachineName: sluice.names.stateMachine,
      stateMachineArn: stateMachineArn(sluice.names.stateMachine),
      ...(roundsSm && roundsName ? { rounds: { definition: definitionOf(roundsSm.props.DefinitionString), stateMachineArn: stateMachineArn(roundsName) } } : {}),
      coordinatorFunctionName: sluice.names.coordinatorFunction,
      coordinatorFunctionArn: functionArn(sluice.names.coordinatorFunction),
      functionNameToHandler,
      functionArnToHandler,
    };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
