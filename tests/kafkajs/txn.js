// kafkajs's transactional producer against Folio: prints one JSON object of what it did.
// Usage: node txn.js BOOTSTRAP TOPIC PARTITIONS GROUP TRANSACTIONAL_ID
// (run by tests/cluster/test_kafka_cluster_txn.py; BOOTSTRAP: host:port[,host:port...]).
// One transaction writes "kjs-c-<p>-<i>" to every partition, sends offsets of GROUP
// (offset 7 of partition 0 of TOPIC) and commits; a second writes "kjs-a-<p>-<i>" and aborts.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic, partitionsText, group, transactionalId] = process.argv.slice(2);
  const partitions = Number(partitionsText);
  const kafka = new Kafka({ clientId: "folio-kafkajs-txn", brokers: bootstrap.split(","),
                            logLevel: logLevel.NOTHING,
                            retry: { retries: 10, initialRetryTime: 200 } });
  const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const seen = { committed: [], aborted: [] };
  try {
    const messages = (kind) => {
      const out = [];
      for (let p = 0; p < partitions; p += 1) {
        for (let i = 0; i < 3; i += 1) out.push({ partition: p, value: `kjs-${kind}-${p}-${i}` });
      }
      return out;
    };
    const committing = await producer.transaction();
    const kept = messages("c");
    await committing.send({ topic, messages: kept });
    await committing.sendOffsets({ consumerGroupId: group, topics: [
      { topic, partitions: [{ partition: 0, offset: "7" }] }] });
    await committing.commit();
    seen.committed = kept.map((m) => m.value);
    const aborting = await producer.transaction();
    const dropped = messages("a");
    await aborting.send({ topic, messages: dropped });
    await aborting.abort();
    seen.aborted = dropped.map((m) => m.value);
  } finally {
    await producer.disconnect();
  }
  process.stdout.write(JSON.stringify(seen));
}

main().catch((error) => {
  process.stderr.write(`${error.stack || error}\n`);
  process.exit(1);
});
