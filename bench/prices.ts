/**
 * AWS list prices, us-east-1, on-demand, no free tier, in US dollars.
 *
 * Taken from the public AWS pricing pages as published in 2025 (DynamoDB on-demand after the
 * 1 November 2024 reduction). Recorded here on 2026-11-29 without re-checking the live pages:
 * re-check them before relying on the dollar figures; every request count the bench reports stays
 * valid whatever the prices.
 */
export const PRICES = {
  /** recorded on; see above */
  date: '2026-11-29 (2025 list prices)',
  region: 'us-east-1',
  kinesis: {
    /** provisioned mode, per shard-hour */
    shardHour: 0.015,
    /** per PUT payload unit (25 KB chunk of a record, data + partition key) */
    putPayloadUnit: 0.014 / 1e6,
    /** GetRecords (and the ESM's polling) is not billed in provisioned mode */
    getRecords: 0,
  },
  lambda: {
    /** Arm (the CDK construct deploys ARM_64), per GB-second */
    gbSecondArm: 0.0000133334,
    request: 0.2 / 1e6,
  },
  dynamodb: {
    /** on-demand, per write request unit (1 KB of a standard write) */
    writeRequestUnit: 0.625 / 1e6,
    /** on-demand, per read request unit (4 KB strongly consistent read) */
    readRequestUnit: 0.125 / 1e6,
  },
  stepFunctions: {
    /** Standard workflows, per state transition */
    stateTransition: 0.025 / 1000,
    /** Express workflows, per request (execution started) */
    expressRequest: 1 / 1e6,
    /** Express workflows, per GB-second of duration (first 1,000 GB-hours a month), billed in 64 MB and 100 ms steps */
    expressGbSecond: 0.00001667,
  },
  s3: {
    put: 0.005 / 1000,
    get: 0.0004 / 1000,
  },
  flink: {
    /** Amazon Managed Service for Apache Flink, per KPU-hour */
    kpuHour: 0.11,
    /** the smallest application: 1 KPU for the job + 1 KPU the service adds for orchestration */
    minKpus: 2,
  },
} as const;

export const HOURS_PER_MONTH = 730;
export const SECONDS_PER_MONTH = HOURS_PER_MONTH * 3600;

/** Amazon Managed Service for Apache Flink's floor: 2 KPU around the clock. */
export const FLINK_FLOOR_PER_MONTH = PRICES.flink.minKpus * PRICES.flink.kpuHour * HOURS_PER_MONTH;

/**
 * Assumptions of the cost model that are not prices (docs/performance.md explains each):
 * latencies of one AWS request as a Lambda function waits on it, and how Lambda's CPU share grows
 * with memory (1,769 MB = one full vCPU). A Lambda function is billed by memory while it waits, so
 * these waits are most of a stage's GB-s; the stage functions' memory is a batch setting
 * (bench/stage-activity.ts `Batching`, SluiceJob's default in cdk/stage-batching.ts).
 */
export const ASSUMPTIONS = {
  coordinatorMemoryMb: 512,
  /** ms a coordinator task takes (a few DynamoDB calls) */
  coordinatorTaskMs: 60,
  /** DynamoDB GetItem/UpdateItem/BatchGetItem/PutItem, one request */
  dynamoMs: 5,
  /** Kinesis PutRecords, one request */
  kinesisPutMs: 20,
  /** S3 PutObject/GetObject, one request */
  s3Ms: 25,
  /** concurrent UpdateItems of DynamoStateStore.applyRows */
  stateWriteConcurrency: 32,
  /** memory at which Lambda gives a function one full vCPU */
  fullVcpuMb: 1769,
} as const;
