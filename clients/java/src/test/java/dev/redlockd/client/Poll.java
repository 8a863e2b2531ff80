package dev.redlockd.client;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/** Bounded polling for a condition, instead of sleeping a fixed time. */
final class Poll {
  /** Generous bound on any condition the tests wait for. */
  static final Duration LIMIT = Duration.ofSeconds(15);

  private Poll() {}

  /** Returns once {@code condition} holds (checked every 20 ms); fails after {@link #LIMIT}. */
  static void until(BooleanSupplier condition, String what) throws InterruptedException {
    long limit = System.nanoTime() + LIMIT.toNanos();
    while (System.nanoTime() < limit) {
      if (condition.getAsBoolean()) {
        return;
      }
      Thread.sleep(20);
    }
    throw new AssertionError("timed out after " + LIMIT + " waiting until " + what);
  }

  /** The lease's lost reason, waiting at most {@link #LIMIT} for it. */
  static LockLostException lost(Lease lease) throws Exception {
    CompletableFuture<LockLostException> lost = lease.lost();
    return lost.get(LIMIT.toMillis(), TimeUnit.MILLISECONDS);
  }
}
