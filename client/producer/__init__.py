"""The producer: `Producer`, its accumulator, sender thread and Kafka's default partitioner."""
