// Apache Kafka's own Java client against a cluster's Kafka listeners (issue 14 §4 item 5).
//
// Run as a single source file: java -cp 'build/java-deps/*' KafkaClientDriver.java <bootstrap> <topic> [records]
// Each step prints one line, "<step> key=value ...", which tests/integration/test_java_client.py
// asserts; a failing step throws, so the exit status is non-zero and stderr has the stack trace.

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class KafkaClientDriver {
    static final int PARTITIONS = 3;
    static final short REPLICATION = 3;
    static final long DEADLINE_MS = 30_000;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int records = args.length > 2 ? Integer.parseInt(args[2]) : 100;
        Properties common = new Properties();
        common.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        common.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, REPLICATION))).all().get(30, TimeUnit.SECONDS);
            System.out.println("created topic=" + topic);
            produce(common, topic, records);
            consumeAssigned(common, topic, records);
            String group = topic + "-group";
            consumeInGroup(common, topic, group, records);
            long committed = 0;
            for (OffsetAndMetadata offset : admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS).values()) {
                committed += offset.offset();
            }
            System.out.println("committed group=" + group + " total=" + committed);
            TopicDescription description = admin.describeTopics(List.of(topic))
                    .allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
            int replicas = description.partitions().get(0).replicas().size();
            System.out.println("described topic=" + topic + " partitions=" + description.partitions().size()
                    + " replicas=" + replicas);
            admin.deleteTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
            System.out.println("deleted topic=" + topic + " listed=" + stillListed(admin, topic));
        }
    }

    /** Whether `topic` is still listed once the deadline passed: brokers learn of a deletion
     *  from the metadata log shortly after the controller acknowledged it, as in Kafka. */
    static boolean stillListed(Admin admin, String topic) throws Exception {
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (admin.listTopics().names().get(30, TimeUnit.SECONDS).contains(topic)) {
            if (System.currentTimeMillis() > deadline) {
                return true;
            }
            Thread.sleep(100);
        }
        return false;
    }

    /** Sends `records` keyed records with acks=all and idempotence, waiting for every ack. */
    static void produce(Properties common, String topic, int records) throws Exception {
        Properties props = new Properties();
        props.putAll(common);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            List<Future<?>> acks = new ArrayList<>();
            for (int i = 0; i < records; i++) {
                acks.add(producer.send(new ProducerRecord<>(topic, "key-" + i, "value-" + i)));
            }
            for (Future<?> ack : acks) {
                ack.get(30, TimeUnit.SECONDS);
            }
        }
        System.out.println("produced records=" + records);
    }

    static Properties consumerProps(Properties common, String group) {
        Properties props = new Properties();
        props.putAll(common);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        if (group != null) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        return props;
    }

    /** Polls until `records` records came (or the deadline); key -> value of what was read. */
    static Map<String, String> pollAll(KafkaConsumer<String, String> consumer, int records) {
        Map<String, String> read = new TreeMap<>();
        int count = 0;
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (count < records && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
                read.put(record.key(), record.value());
                count++;
            }
        }
        if (count != read.size()) {
            throw new IllegalStateException("read " + count + " records but " + read.size() + " distinct keys");
        }
        return read;
    }

    static String check(Map<String, String> read, int records) {
        for (int i = 0; i < records; i++) {
            if (!("value-" + i).equals(read.get("key-" + i))) {
                return "false";
            }
        }
        return String.valueOf(read.size() == records);
    }

    /** Reads every partition from the beginning with assign, no group. */
    static void consumeAssigned(Properties common, String topic, int records) {
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(common, null))) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (int p = 0; p < PARTITIONS; p++) {
                partitions.add(new TopicPartition(topic, p));
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<String, String> read = pollAll(consumer, records);
            System.out.println("assigned records=" + read.size() + " exact=" + check(read, records));
        }
    }

    /** Reads the topic as a member of `group` (classic protocol), then commits synchronously. */
    static void consumeInGroup(Properties common, String topic, String group, int records) {
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(common, group))) {
            consumer.subscribe(List.of(topic));
            Map<String, String> read = pollAll(consumer, records);
            consumer.commitSync(Duration.ofSeconds(30));
            System.out.println("group records=" + read.size() + " exact=" + check(read, records)
                    + " assigned=" + consumer.assignment().size());
        }
    }
}
