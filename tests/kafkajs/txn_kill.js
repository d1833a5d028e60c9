// kafkajs's transactional producer across a broker's SIGKILL: prints JSON lines.
// Usage: node txn_kill.js BOOTSTRAP TOPIC PARTITIONS TRANSACTIONAL_ID
// (run by tests/cluster/test_kafka_cluster_txn.py). Writes "kjs-across-<p>-<i>" in a
// transaction, prints {"phase": "sent"} and waits for a line on stdin (the test kills a
// broker then), writes "kjs-across-after-<p>-<i>" in the same transaction and commits it
// (or aborts it if the commit fails); then commits "kjs-after-<p>-<i>". Last line:
// {"outcomes": {name: "committed" | "aborted" | "unknown"}}.
const readline = require("readline");
const { Kafka, logLevel } = require("kafkajs");

function values(prefix, partitions) {
  const out = [];
  for (let p = 0; p < partitions; p += 1) {
    for (let i = 0; i < 3; i += 1) out.push({ partition: p, value: `${prefix}-${p}-${i}` });
  }
  return out;
}

async function end(txn, commit) {
  try {
    if (commit) await txn.commit(); else await txn.abort();
    return commit ? "committed" : "aborted";
  } catch (error) {
    process.stderr.write(`end: ${error.stack || error}\n`);
    if (!commit) return "unknown";
    try {
      await txn.abort();
      return "aborted";
    } catch (again) {
      process.stderr.write(`abort: ${again.stack || again}\n`);
      return "unknown";
    }
  }
}

async function main() {
  const [bootstrap, topic, partitionsText, transactionalId] = process.argv.slice(2);
  const partitions = Number(partitionsText);
  const kafka = new Kafka({ clientId: "folio-kafkajs-kill", brokers: bootstrap.split(","),
                            logLevel: logLevel.NOTHING,
                            retry: { retries: 30, initialRetryTime: 300, maxRetryTime: 5000 } });
  const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1,
                                    transactionTimeout: 120000 });
  await producer.connect();
  const outcomes = {};
  const lines = readline.createInterface({ input: process.stdin });
  const go = new Promise((resolve) => lines.once("line", resolve));
  try {
    const across = await producer.transaction();
    await across.send({ topic, messages: values("kjs-across", partitions) });
    process.stdout.write(`${JSON.stringify({ phase: "sent" })}\n`);
    await go;
    let sent = true;
    try {
      await across.send({ topic, messages: values("kjs-across-after", partitions) });
    } catch (error) {
      process.stderr.write(`send: ${error.stack || error}\n`);
      sent = false;
    }
    outcomes["kjs-across"] = await end(across, sent);
    outcomes["kjs-across-after"] = outcomes["kjs-across"];
    const after = await producer.transaction();
    await after.send({ topic, messages: values("kjs-after", partitions) });
    outcomes["kjs-after"] = await end(after, true);
  } finally {
    lines.close();
    await producer.disconnect();
  }
  process.stdout.write(`${JSON.stringify({ outcomes })}\n`);
}

main().catch((error) => {
  process.stderr.write(`${error.stack || error}\n`);
  process.exit(1);
});
