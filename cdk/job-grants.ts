/**
 * What `SluiceJob.grantWriteSource` and `grantReadResults` give: the statements for producers and
 * for readers of the results, each limited to the job's streams, tables, objects and keys.
 */
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as kinesis from 'aws-cdk-lib/aws-kinesis';
import type * as kms from 'aws-cdk-lib/aws-kms';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type { Plan } from '../shared/plan/plan.js';
import { DDB_READ, KINESIS_READ } from './job-iam.js';

/** The resources of a job that its grants name. */
export interface GrantedResources {
  plan: Plan;
  key?: kms.IKey;
  sourceStreams: ReadonlyMap<string, kinesis.IStream>;
  sourceKeys: ReadonlyMap<string, kms.IKey>;
  sinkKeys: ReadonlyMap<string, kms.IKey>;
  stateTable: dynamodb.ITable;
  sinkTables: ReadonlyMap<string, dynamodb.ITable>;
  sinkStreams: ReadonlyMap<string, kinesis.IStream>;
  bucket: s3.IBucket;
}

export function writeSourceGrant(job: GrantedResources, grantee: iam.IGrantable, sourceName?: string): iam.Grant {
  let streams: kinesis.IStream[];
  if (sourceName === undefined) {
    streams = [...new Set(job.sourceStreams.values())];
  } else {
    const stream = job.sourceStreams.get(sourceName);
    if (!stream) {
      throw new Error(
        `job "${job.plan.job}" has no source named "${sourceName}" (sources: ${[...job.sourceStreams.keys()].join(', ')})`,
      );
    }
    streams = [stream];
  }
  const grant = iam.Grant.addToPrincipal({
    grantee,
    actions: ['kinesis:PutRecord', 'kinesis:PutRecords', 'kinesis:DescribeStream', 'kinesis:DescribeStreamSummary', 'kinesis:ListShards'],
    resourceArns: streams.map((s) => s.streamArn),
  });
  const keys = [...(job.key ? [job.key] : []), ...[...job.sourceKeys].filter(([name]) => sourceName === undefined || name === sourceName).map(([, k]) => k)];
  return keys.length
    ? grant.combine(iam.Grant.addToPrincipal({ grantee, actions: ['kms:GenerateDataKey'], resourceArns: [...new Set(keys.map((k) => k.keyArn))] }))
    : grant;
}

export function readResultsGrant(job: GrantedResources, grantee: iam.IGrantable): iam.Grant {
  let grant = iam.Grant.addToPrincipal({
    grantee,
    actions: DDB_READ,
    resourceArns: [job.stateTable.tableArn],
  });
  const outputStreamArns = [...job.sinkStreams.values()].map((st) => st.streamArn);
  if (outputStreamArns.length) {
    grant = grant.combine(iam.Grant.addToPrincipal({ grantee, actions: KINESIS_READ, resourceArns: outputStreamArns }));
  }
  if (job.plan.sinks.some((s) => s.kind === 's3-file')) {
    grant = grant.combine(iam.Grant.addToPrincipal({ grantee, actions: ['s3:GetObject'], resourceArns: [job.bucket.arnForObjects('sinks/*')] }));
  }
  const sinkArns = [...job.sinkTables.values()].map((t) => t.tableArn);
  if (sinkArns.length) {
    grant = grant.combine(
      iam.Grant.addToPrincipal({
        grantee,
        actions: [...DDB_READ, 'dynamodb:Scan', 'dynamodb:DescribeTable'],
        resourceArns: sinkArns,
      }),
    );
  }
  const keys = [...(job.key ? [job.key] : []), ...job.sinkKeys.values()];
  return keys.length
    ? grant.combine(iam.Grant.addToPrincipal({ grantee, actions: ['kms:Decrypt', 'kms:DescribeKey'], resourceArns: [...new Set(keys.map((k) => k.keyArn))] }))
    : grant;
}
