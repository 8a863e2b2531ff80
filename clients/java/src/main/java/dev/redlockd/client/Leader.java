package dev.redlockd.client;

import java.time.Duration;
import java.time.Instant;
import java.util.Objects;
import redlock.v1.Election;

/**
 * The current leader of an election as anyone may see it, from {@link LockClient#leader} or an
 * {@link Observation}: its value, its term, since when it leads, and how long it stays leader at
 * least. Immutable; carries no token.
 */
public final class Leader {
  private final String name;
  private final String value;
  private final long term;
  private final Instant since;
  private final Duration remaining;
  private final long valueVersion;

  private Leader(
      String name, String value, long term, Instant since, Duration remaining, long valueVersion) {
    this.name = name;
    this.value = value;
    this.term = term;
    this.since = since;
    this.remaining = remaining;
    this.valueVersion = valueVersion;
  }

  static Leader fromWire(Election.Leader wire) {
    Instant since =
        wire.hasSince()
            ? Instant.ofEpochSecond(wire.getSince().getSeconds(), wire.getSince().getNanos())
            : null;
    return new Leader(
        wire.getName(),
        wire.getValue(),
        wire.getTerm(),
        since,
        Wire.fromProto(wire.getRemaining()),
        wire.getValueVersion());
  }

  /** The election's name. */
  public String name() {
    return name;
  }

  /**
   * The leader's value (an address, a pod name): the one it campaigned with, or the last it
   * proclaimed ({@link Leadership#proclaim}).
   */
  public String value() {
    return value;
  }

  /**
   * The leadership's term, its fence: strictly greater than every earlier leader's. The contract's
   * uint64: compare with {@link Long#compareUnsigned}.
   */
  public long term() {
    return term;
  }

  /** When the leadership began, by the masters' clocks (null if the daemon did not say). */
  public Instant since() {
    return since;
  }

  /** How long the leadership stays held at least, as a majority saw it when asked. */
  public Duration remaining() {
    return remaining;
  }

  /**
   * Which of this term's values {@link #value()} is: 0 for the one the leader campaigned with,
   * higher after each {@link Leadership#proclaim} (not a count: a retried Proclaim may skip
   * numbers). With {@link #term()} it orders the values observers are told: of two readings of
   * the same term, the higher version is the newer value. The contract's uint64: compare with
   * {@link Long#compareUnsigned}.
   */
  public long valueVersion() {
    return valueVersion;
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof Leader that
        && term == that.term
        && valueVersion == that.valueVersion
        && name.equals(that.name)
        && value.equals(that.value)
        && Objects.equals(since, that.since)
        && remaining.equals(that.remaining);
  }

  @Override
  public int hashCode() {
    return Objects.hash(name, value, term, valueVersion, since, remaining);
  }

  @Override
  public String toString() {
    return "Leader{name=\""
        + name
        + "\", value=\""
        + value
        + "\", term="
        + Long.toUnsignedString(term)
        + ", valueVersion="
        + Long.toUnsignedString(valueVersion)
        + ", since="
        + since
        + ", remaining="
        + remaining
        + "}";
  }
}
