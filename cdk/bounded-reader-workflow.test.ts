/** The backfill workflow: the bounded reader function, its grants, and List → Map(read) → End. */
import { Match } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { compileSql } from '../shared/sql/index.js';
import { BoundedReaderWorkflow } from './bounded-reader-workflow.js';
import { EXAMPLE_MODULE, synthJob } from './test-support.js';

const { job } = compileSql(
  `CREATE TABLE bid (auction BIGINT, price BIGINT, dateTime TIMESTAMP(3)) WITH ('connector' = 's3', 'prefix' = 'input/', 'shards' = '2', 'event_time' = 'dateTime');
   CREATE TABLE o (auction BIGINT, n BIGINT, PRIMARY KEY (auction)) WITH ('connector' = 'dynamodb');
   INSERT INTO o SELECT auction, COUNT(*) FROM bid GROUP BY auction;`,
  { name: 'backfill' },
);

describe('BoundedReaderWorkflow', () => {
  const { template } = synthJob(job, {}, (stack, sluice) => {
    new BoundedReaderWorkflow(stack, 'Backfill', { job: sluice, jobModule: EXAMPLE_MODULE, source: 'bid', maxConcurrency: 4 });
  });

  it('deploys the reader with the job prefix and its bucket, allowed to read the bucket and put into the source stream', () => {
    template.hasResourceProperties('AWS::Lambda::Function', {
      Description: 'Sluice backfill: bounded reader of source bid',
      Environment: { Variables: Match.objectLike({ SLUICE_PREFIX: 'sluice-backfill', SLUICE_BUCKET: Match.anyValue() }) },
    });
    const policies = JSON.stringify(template.findResources('AWS::IAM::Policy'));
    expect(policies).toMatch(/kinesis:PutRecords/);
    expect(policies).toMatch(/s3:GetObject\*/);
  });

  it('fans out over the objects: List → Map (MaxConcurrency) of Read → EndInput', () => {
    const machines = template.findResources('AWS::StepFunctions::StateMachine', { Properties: { StateMachineName: 'sluice-backfill-read-bid' } });
    const [machine] = Object.values(machines) as Array<{ Properties: { DefinitionString: unknown } }>;
    const definition = JSON.stringify(machine!.Properties.DefinitionString);
    for (const part of ['\\"StartAt\\":\\"List\\"', '\\"Type\\":\\"Map\\"', '\\"MaxConcurrency\\":4', '\\"ItemsPath\\":\\"$.listing.objects\\"', '\\"EndInput\\"', '\\"action\\":\\"read\\"']) {
      expect(definition).toContain(part);
    }
  });

  it('refuses a source the job does not have', () => {
    expect(() =>
      synthJob(job, {}, (stack, sluice) => {
        new BoundedReaderWorkflow(stack, 'Backfill', { job: sluice, jobModule: EXAMPLE_MODULE, source: 'bids' });
      }),
    ).toThrow(/has no source "bids" \(sources: bid\)/);
  });
});
