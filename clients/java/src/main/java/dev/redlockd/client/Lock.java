package dev.redlockd.client;

import java.time.Duration;
import redlock.v1.LockOuterClass;

/**
 * A granted lock as the daemon describes it, with its validity placed on this process's monotonic
 * clock. Immutable. Its {@link #toString()} leaves the token out: the token is a secret.
 */
public final class Lock {
  private final String resource;
  private final String token;
  private final long fence;
  private final Duration validity;
  private final long validUntilNanos;

  /**
   * A lock known by its resource and token (to release, extend or validate a lock granted to
   * another process, for example). Its fence is 0 and its validity zero.
   */
  public Lock(String resource, String token) {
    this(resource, token, 0L, Duration.ZERO, Wire.now());
  }

  private Lock(String resource, String token, long fence, Duration validity, long since) {
    this.resource = resource;
    this.token = token;
    this.fence = fence;
    this.validity = validity;
    this.validUntilNanos = Wire.plus(since, validity);
  }

  /** The contract's Lock, its validity counted from {@code since} ({@link System#nanoTime()}). */
  static Lock fromWire(LockOuterClass.Lock wire, long since) {
    return new Lock(
        wire.getResource(), wire.getToken(), wire.getFence(), Wire.fromProto(wire.getValidity()), since);
  }

  /** The resource locked. */
  public String resource() {
    return resource;
  }

  /** Opaque proof of ownership, needed to extend, release and validate. Never log it. */
  public String token() {
    return token;
  }

  /**
   * The fencing token: strictly greater than every earlier holder's. Pass it with every write made
   * under the lock. The contract's uint64: compare with {@link Long#compareUnsigned}.
   */
  public long fence() {
    return fence;
  }

  /** The guaranteed validity the daemon reported. */
  public Duration validity() {
    return validity;
  }

  /** End of the validity on {@link System#nanoTime()}'s clock. */
  public long validUntilNanos() {
    return validUntilNanos;
  }

  /** Guaranteed validity left now (zero once it ran out). */
  public Duration remaining() {
    return Duration.ofNanos(Math.max(0L, validUntilNanos - Wire.now()));
  }

  @Override
  public String toString() {
    return "Lock{resource=\""
        + resource
        + "\", fence="
        + Long.toUnsignedString(fence)
        + ", validity="
        + validity
        + "}";
  }
}
