// kafkajs's admin client against a Folio broker: prints one JSON object of what it saw.
// Usage: node admin.js HOST:PORT TOPIC   (run by tests/integration/kafka/test_kafkajs_admin.py)
const { Kafka, logLevel, ConfigResourceTypes } = require("kafkajs");

async function main() {
  const [bootstrap, topic] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "folio-kafkajs", brokers: [bootstrap],
                            logLevel: logLevel.NOTHING, retry: { retries: 3 } });
  const admin = kafka.admin();
  await admin.connect();
  const seen = {};
  try {
    seen.cluster = await admin.describeCluster();
    seen.created = await admin.createTopics({ topics: [{ topic, numPartitions: 1,
      configEntries: [{ name: "retention.ms", value: "3600000" }] }], waitForLeaders: true });
    const producer = kafka.producer();
    await producer.connect();
    await producer.send({ topic, messages: [0, 1, 2, 3].map((i) => ({ partition: 0, value: `v${i}` })) });
    await producer.disconnect();
    const configs = await admin.describeConfigs({ includeSynonyms: false, resources: [
      { type: ConfigResourceTypes.TOPIC, name: topic },
      { type: ConfigResourceTypes.BROKER, name: "0" }] });
    seen.configs = configs.resources.map((r) => ({ type: r.resourceType, name: r.resourceName,
      error: r.errorCode, entries: Object.fromEntries(r.configEntries.map(
        (e) => [e.configName, { value: e.configValue, isDefault: e.isDefault,
                                source: e.configSource, readOnly: e.readOnly }])) }));
    const synonyms = await admin.describeConfigs({ includeSynonyms: true, resources: [
      { type: ConfigResourceTypes.TOPIC, name: topic,
        configNames: ["retention.ms", "max.message.bytes"] },
      { type: ConfigResourceTypes.BROKER, name: "0", configNames: ["broker.id"] }] });
    seen.synonyms = synonyms.resources.map((r) => Object.fromEntries(r.configEntries.map(
      (e) => [e.configName, e.configSynonyms.map(
        (s) => [s.configName, s.configValue, s.configSource])])));
    await admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC,
      name: topic, configEntries: [{ name: "max.message.bytes", value: "500000" }] }] });
    const altered = await admin.describeConfigs({ includeSynonyms: false, resources: [
      { type: ConfigResourceTypes.TOPIC, name: topic, configNames: ["max.message.bytes",
                                                                   "retention.ms"] }] });
    seen.altered = Object.fromEntries(altered.resources[0].configEntries.map(
      (e) => [e.configName, e.configValue]));
    await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: "-1" }] });
    seen.offsetsAfterDelete = await admin.fetchTopicOffsets(topic);
    await admin.createPartitions({ topicPartitions: [{ topic, count: 3 }] });
    const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
    seen.partitions = metadata.topics[0].partitions.map((p) => p.partitionId).sort();
    try {
      await admin.createPartitions({ topicPartitions: [{ topic, count: 4 }] });
      seen.growByOne = "accepted";
    } catch (error) {
      seen.growByOne = error.type || String(error);
    }
  } finally {
    await admin.disconnect();
  }
  process.stdout.write(JSON.stringify(seen));
}

main().catch((error) => {
  process.stderr.write(`${error.stack || error}\n`);
  process.exit(1);
});
