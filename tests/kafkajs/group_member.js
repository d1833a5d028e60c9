// One kafkajs consumer (classic protocol only) in a group: prints a JSON line per event.
// Usage: node group_member.js HOST:PORT GROUP TOPIC   (run by test_kafka_group_upgrade.py)
// Lines: {"joined": [partitions]} after each rebalance it joins, {"read": [partition,
// offset]} per record (committed before the next), {"left": true} once it has left the
// group after SIGTERM (a LeaveGroup).
const { Kafka, logLevel } = require("kafkajs");

function say(line) {
  process.stdout.write(JSON.stringify(line) + "\n");
}

async function main() {
  const [bootstrap, group, topic] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "folio-kafkajs-member", brokers: [bootstrap],
                            logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 10000,
                                    heartbeatInterval: 500 });
  consumer.on(consumer.events.GROUP_JOIN, (event) => {
    say({ joined: (event.payload.memberAssignment[topic] || []).slice().sort() });
  });
  consumer.on(consumer.events.CRASH, (event) => {
    say({ crash: String(event.payload.error) });
  });
  let stopping = false;
  process.on("SIGTERM", async () => {
    if (stopping) return;
    stopping = true;
    await consumer.disconnect();
    say({ left: true });
    process.exit(0);
  });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      await consumer.commitOffsets([{ topic, partition,
                                      offset: (BigInt(message.offset) + 1n).toString() }]);
      say({ read: [partition, Number(message.offset)] });
    },
  });
}

main().catch((error) => {
  say({ error: String(error) });
  process.exit(1);
});
