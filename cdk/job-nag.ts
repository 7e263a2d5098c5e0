/**
 * cdk-nag acknowledgements for the coordinator: what CDK's tasks add to the workflows' policies,
 * and the settings (tracing, log level, runtime) the job keeps off or fixed by choice. Each names
 * the one resource or reason it covers, so a new finding is never hidden by an old one.
 */
import { Stack, Validations } from 'aws-cdk-lib';
import type { CfnElement } from 'aws-cdk-lib';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { IConstruct } from 'constructs';
import type { SluiceJobProps } from './sluice-job-props.js';

export function acknowledgeRuntime(fn: lambda.Function): void {
  Validations.of(fn).acknowledge({
    id: 'AwsSolutions-L1',
    reason: 'Node.js 22 is the runtime the project builds and tests for (LAMBDA_RUNTIME); moving to a newer line is a deliberate change.',
  });
}

function logicalId(stack: Stack, c: IConstruct): string {
  return stack.resolve(stack.getLogicalId(c.node.defaultChild as CfnElement)) as string;
}

/** The coordinator workflow and, with `expressCheckpoints`, its Express rounds. */
export function acknowledgeCoordinator(
  stateMachine: sfn.StateMachine,
  rounds: sfn.StateMachine | undefined,
  coordinatorFunction: lambda.Function,
  props: SluiceJobProps,
): void {
  const stack = Stack.of(stateMachine);
  if (!(props.tracing ?? false)) {
    Validations.of(stateMachine).acknowledge({ id: 'AwsSolutions-SF2', reason: 'X-Ray tracing is a prop (tracing: true); off by default to keep an idle job free of trace costs.' });
  }
  if (rounds) acknowledgeRounds(stateMachine, rounds, coordinatorFunction, props, stack);
  if ((props.coordinatorLogLevel ?? 'ERROR') !== 'ALL') {
    Validations.of(stateMachine).acknowledge({
      id: 'AwsSolutions-SF1',
      reason: 'The workflow logs failed states and executions (ERROR); ALL logs three transitions per checkpoint with their data, a cost worth paying only while debugging (coordinatorLogLevel).',
    });
  }
  const fnLogicalId = logicalId(stack, coordinatorFunction);
  const smPolicy = stateMachine.role.node.tryFindChild('DefaultPolicy') as IConstruct;
  Validations.of(smPolicy).acknowledge(
    {
      id: `AwsSolutions-IAM5[Resource::<${fnLogicalId}.Arn>:*]`,
      reason: 'Added by the LambdaInvoke task: versions and aliases of the coordinator function, and no other function.',
    },
    {
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason:
        'X-Ray tracing (PutTraceSegments, PutTelemetryRecords, GetSampling*) and CloudWatch Logs delivery (CreateLogDelivery, ...) have no resource-level permissions; CDK adds them for tracing and logging.',
    },
  );
}

/** The Express rounds (expressCheckpoints) and what starting them adds to the workflow's policy. */
function acknowledgeRounds(stateMachine: sfn.StateMachine, rounds: sfn.StateMachine, coordinatorFunction: lambda.Function, props: SluiceJobProps, stack: Stack): void {
  if (!(props.tracing ?? false)) {
    Validations.of(rounds).acknowledge({ id: 'AwsSolutions-SF2', reason: 'X-Ray tracing is a prop (tracing: true); off by default to keep an idle job free of trace costs.' });
  }
  if ((props.coordinatorLogLevel ?? 'ERROR') !== 'ALL') {
    Validations.of(rounds).acknowledge({
      id: 'AwsSolutions-SF1',
      reason: 'The rounds log failed states and executions (ERROR); ALL logs every state of every checkpoint with its data (about $1.5 a month at a 10 s interval), worth it while debugging (coordinatorLogLevel).',
    });
  }
  const fnLogicalId = logicalId(stack, coordinatorFunction);
  Validations.of(rounds.role.node.tryFindChild('DefaultPolicy') as IConstruct).acknowledge(
    { id: `AwsSolutions-IAM5[Resource::<${fnLogicalId}.Arn>:*]`, reason: 'Added by the LambdaInvoke task: versions and aliases of the coordinator function, and no other function.' },
    { id: 'AwsSolutions-IAM5[Resource::*]', reason: 'X-Ray tracing and CloudWatch Logs delivery have no resource-level permissions; CDK adds them for tracing and logging.' },
  );
  const roundsLogicalId = logicalId(stack, rounds);
  Validations.of(stateMachine.role.node.tryFindChild('DefaultPolicy') as IConstruct).acknowledge({
    id: `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:{"Fn::Select":[6,{"Fn::Split":[":",{"Ref":"${roundsLogicalId}"}]}]}*]`,
    reason: 'Added by the startExecution.sync:2 task: describe and stop the executions of the rounds state machine, and of no other.',
  });
}

/** Active tracing adds X-Ray statements with no resource-level permissions to each function's role. */
export function acknowledgeTracing(fns: readonly lambda.Function[]): void {
  for (const fn of fns) {
    Validations.of(fn.role!).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason: 'X-Ray PutTraceSegments and PutTelemetryRecords have no resource-level permissions; added by active tracing (tracing: true).',
    });
  }
}
