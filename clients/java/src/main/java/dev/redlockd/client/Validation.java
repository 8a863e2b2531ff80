package dev.redlockd.client;

import java.time.Duration;

/**
 * The answer to {@link LockClient#validate}: whether a (resource, token) pair is still the current
 * holder on a majority, and for how long at least, counted from when the question was sent.
 */
public final class Validation {
  private final boolean held;
  private final Duration validity;
  private final long validUntilNanos;

  Validation(boolean held, Duration validity, long since) {
    this.held = held;
    this.validity = held ? validity : Duration.ZERO;
    this.validUntilNanos = Wire.plus(since, this.validity);
  }

  /** Whether the token still holds the lock on a majority of masters. */
  public boolean held() {
    return held;
  }

  /** Remaining guaranteed validity when held (zero otherwise). */
  public Duration validity() {
    return validity;
  }

  /** End of that validity on {@link System#nanoTime()}'s clock, counted from the request's send. */
  public long validUntilNanos() {
    return validUntilNanos;
  }

  @Override
  public String toString() {
    return "Validation{held=" + held + ", validity=" + validity + "}";
  }
}
