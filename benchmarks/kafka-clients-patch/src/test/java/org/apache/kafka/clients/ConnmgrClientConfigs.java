package org.apache.kafka.clients;

import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

import java.util.HashMap;
import java.util.Map;
import java.util.function.Predicate;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Checks the project's tests share about a new client configuration (not a test class itself).
 */
final class ConnmgrClientConfigs {

    private ConnmgrClientConfigs() {
    }

    /**
     * The producer, the consumer and the admin client each define {@code key} with default {@code dflt}, and
     * {@code read} (the {@code ClientUtils} reader of the key) returns that default when the key is absent, the value
     * when it is set, and the default again for a configuration that does not define the key at all.
     */
    static void assertEveryClientDefines(String key, boolean dflt, Predicate<AbstractConfig> read) {
        Map<String, Object> props = new HashMap<>();
        props.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, "localhost:9092");
        Map<String, Object> producer = new HashMap<>(props);
        producer.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        producer.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        Map<String, Object> consumer = new HashMap<>(props);
        consumer.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        consumer.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        assertEquals(dflt, read.test(new ProducerConfig(producer)));
        assertEquals(dflt, read.test(new ConsumerConfig(consumer)));
        assertEquals(dflt, read.test(new AdminClientConfig(props)));

        producer.put(key, !dflt);
        consumer.put(key, !dflt);
        props.put(key, !dflt);
        assertEquals(!dflt, read.test(new ProducerConfig(producer)));
        assertEquals(!dflt, read.test(new ConsumerConfig(consumer)));
        assertEquals(!dflt, read.test(new AdminClientConfig(props)));

        // A configuration that does not define the key (not a producer, consumer or admin client) gets the default.
        assertEquals(dflt, read.test(new AbstractConfig(new ConfigDef(), Map.of())));
    }
}
