// kafkajs's idempotent producer writing keyed records while the topic is scaled.
// Usage: node scaling.js HOSTS TOPIC MARKER   (run by tests/cluster/test_kafka_cluster_scaling.py)
// Prints "producing" once the first records are delivered, goes on until the
// file MARKER exists (the test scales the topic meanwhile), sends 20 more
// rounds, then prints one JSON line: {"delivered": [[key, number, partition]...],
// "errors": [...]}.
const fs = require("fs");
const { Kafka, logLevel } = require("kafkajs");

const KEYS = 12;

async function main() {
  const [hosts, topic, marker] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "folio-kafkajs-scaling", brokers: hosts.split(","),
                            logLevel: logLevel.NOTHING });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const delivered = [];
  const errors = [];
  let number = 0;
  let after = -1;
  while (after < 20) {
    const messages = [];
    for (let index = 0; index < KEYS; index++) {
      const key = `key-${index}`;
      messages.push({ key, value: `${key}:${number}` });
    }
    try {
      await producer.send({ topic, acks: -1, messages });
      for (const message of messages) {
        delivered.push([message.key, number, -1]);  // (partition: not needed per key)
      }
    } catch (error) {
      errors.push(String(error));
      break;
    }
    if (number === 2) {
      console.log("producing");
    }
    number += 1;
    if (after >= 0) {
      after += 1;
    } else if (fs.existsSync(marker)) {
      after = 0;
    } else {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
  await producer.disconnect();
  console.log(JSON.stringify({ delivered, errors }));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
