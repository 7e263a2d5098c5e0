/** The IAM pieces every role of a job is written from: the action lists and the shared statements. */
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as kms from 'aws-cdk-lib/aws-kms';
import type * as logs from 'aws-cdk-lib/aws-logs';

export const DDB_READ = ['dynamodb:GetItem', 'dynamodb:BatchGetItem', 'dynamodb:Query'];
export const DDB_READ_WRITE = [...DDB_READ, 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:BatchWriteItem', 'dynamodb:DeleteItem'];
export const DDB_SINK_WRITE = ['dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:BatchWriteItem'];
export const KINESIS_READ = [
  'kinesis:DescribeStream',
  'kinesis:DescribeStreamSummary',
  'kinesis:GetRecords',
  'kinesis:GetShardIterator',
  'kinesis:ListShards',
];

/** Writing to the function's own log group, and no other. */
export function logStatement(logGroup: logs.LogGroup): iam.PolicyStatement {
  // logGroupArn ends in ":*" (the log streams of this one group, which Lambda names per environment)
  return new iam.PolicyStatement({
    sid: 'OwnLogGroup',
    actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
    resources: [logGroup.logGroupArn],
  });
}

/** KMS use of an imported stream or table: read, write and publish under its key. */
export function importedKeyStatements(sid: string, keys: readonly kms.IKey[]): iam.PolicyStatement[] {
  const arns = [...new Set(keys.map((k) => k.keyArn))];
  return arns.length ? [new iam.PolicyStatement({ sid, actions: ['kms:Decrypt', 'kms:Encrypt', 'kms:GenerateDataKey', 'kms:DescribeKey'], resources: arns })] : [];
}
