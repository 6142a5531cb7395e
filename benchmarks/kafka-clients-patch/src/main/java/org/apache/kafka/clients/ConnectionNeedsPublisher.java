package org.apache.kafka.clients;

/**
 * One component's channel to tell its {@link KafkaClient} what it needs connections to (KIP (b), rule 6). Obtained
 * from {@link KafkaClient#needsPublisher(String)}.
 */
public interface ConnectionNeedsPublisher {

    /** Publishes nothing: the publisher of a {@link KafkaClient} that does not close unneeded connections. */
    ConnectionNeedsPublisher NONE = needs -> { };

    /**
     * Replaces this component's needs with {@code needs}. Callable from any thread, holding any lock; never blocks
     * and takes no lock but the publisher's own reference, so that publishing cannot change the client's lock order.
     */
    void publish(ConnectionNeeds needs);
}
