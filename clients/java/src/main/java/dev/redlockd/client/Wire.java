package dev.redlockd.client;

import java.time.Duration;

/**
 * Between this library's types ({@link Duration}, unsigned fences) and the contract's
 * (google.protobuf.Duration). Bad input is refused here, with the field named, before any call.
 */
final class Wire {
  private Wire() {}

  /** The monotonic clock every validity is measured on, in nanoseconds. */
  static long now() {
    return System.nanoTime();
  }

  /** {@code value} (not null, not negative) as a protobuf Duration; {@code field} names it. */
  static com.google.protobuf.Duration toProto(Duration value, String field) {
    if (value == null) {
      throw InvalidArgumentException.of(field, "must not be null");
    }
    if (value.isNegative()) {
      throw InvalidArgumentException.of(field, "must not be negative, got " + value);
    }
    return com.google.protobuf.Duration.newBuilder()
        .setSeconds(value.getSeconds())
        .setNanos(value.getNano())
        .build();
  }

  /** A protobuf Duration as a {@link Duration} (absent: zero). */
  static Duration fromProto(com.google.protobuf.Duration value) {
    return Duration.ofSeconds(value.getSeconds(), value.getNanos());
  }

  /** Checks that {@code value} is a non-empty string; {@code field} names it in errors. */
  static String requireString(String value, String field) {
    if (value == null || value.isEmpty()) {
      throw InvalidArgumentException.of(
          field, "must be a non-empty string, got " + (value == null ? "null" : "\"\""));
    }
    return value;
  }

  /** Checks that {@code value} is not null; {@code field} names it in errors. */
  static <T> T requireNonNull(T value, String field) {
    if (value == null) {
      throw InvalidArgumentException.of(field, "must not be null");
    }
    return value;
  }

  /** {@code since + duration} on the monotonic clock, saturated instead of overflowing. */
  static long plus(long since, Duration duration) {
    long nanos;
    try {
      nanos = duration.toNanos();
    } catch (ArithmeticException tooLong) {
      nanos = Long.MAX_VALUE / 2;
    }
    return since + Math.min(nanos, Long.MAX_VALUE / 2);
  }
}
