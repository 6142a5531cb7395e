package org.apache.kafka.clients;

import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * Checks the project's tests share about a new client configuration (not a test class itself).
 */
final class ConnmgrClientConfigs {

    /** The producer's, the consumer's and the admin client's configuration of given properties. */
    private static final List<Function<Map<String, Object>, AbstractConfig>> CLIENTS = List.of(
        props -> new ProducerConfig(with(props,
                ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class,
                ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class)),
        props -> new ConsumerConfig(with(props,
                ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class,
                ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class)),
        props -> new AdminClientConfig(with(props))
    );

    private ConnmgrClientConfigs() {
    }

    /** {@code props} with a bootstrap server and the given key/value pairs. */
    private static Map<String, Object> with(Map<String, Object> props, Object... pairs) {
        Map<String, Object> all = new HashMap<>(props);
        all.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, "localhost:9092");
        for (int i = 0; i < pairs.length; i += 2)
            all.put((String) pairs[i], pairs[i + 1]);
        return all;
    }

    /**
     * The producer, the consumer and the admin client each define {@code key} with default {@code dflt}, and
     * {@code read} (the {@code ClientUtils} reader of the key) returns that default when the key is absent,
     * {@code other} when the key is set to it, and the default again for a configuration that does not define the key
     * at all.
     */
    static <T> void assertEveryClientDefines(String key, T dflt, T other, Function<AbstractConfig, T> read) {
        for (Function<Map<String, Object>, AbstractConfig> client : CLIENTS) {
            AbstractConfig absent = client.apply(Map.of());
            assertEquals(dflt, read.apply(absent), absent.getClass().getSimpleName() + " without " + key);
            AbstractConfig set = client.apply(Map.of(key, other));
            assertEquals(other, read.apply(set), set.getClass().getSimpleName() + " with " + key + "=" + other);
        }
        // A configuration that does not define the key (not a producer, consumer or admin client) gets the default.
        assertEquals(dflt, read.apply(new AbstractConfig(new ConfigDef(), Map.of())));
    }

    /** The producer, the consumer and the admin client each reject {@code key} set to {@code value}. */
    static void assertEveryClientRejects(String key, Object value) {
        for (Function<Map<String, Object>, AbstractConfig> client : CLIENTS)
            assertThrows(ConfigException.class, () -> client.apply(Map.of(key, value)), key + "=" + value);
    }
}
