package dev.redlockd.client;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * {@link Lease#close()} remembers the release attempt: after a {@link Lease#release()} that threw,
 * try-with-resources must surface that exception itself, not Java's "Self-suppression not
 * permitted" (which close() rethrowing the same instance used to cause), and closing twice is a
 * no-op.
 */
class CloseTest {
  @Test
  void closeAfterAFailedReleaseLeavesTheReleasesExceptionAlone() throws Exception {
    try (Daemon daemon = Daemon.start();
        LockClient client =
            LockClient.builder(daemon.address).deadline(Duration.ofSeconds(2)).build()) {
      RedlockdException[] fromRelease = new RedlockdException[1];
      DeadlineExceededException thrown;
      try {
        thrown =
            assertThrows(
                DeadlineExceededException.class,
                () -> {
                  // A ttl far beyond the release timeout: the lease's own timer stays quiet.
                  try (Lease lease = client.hold("close/after-failed-release", Duration.ofSeconds(60))) {
                    // A frozen daemon never answers the release, which then times out.
                    daemon.signal("STOP");
                    try {
                      lease.release();
                    } catch (RedlockdException failed) {
                      fromRelease[0] = failed;
                      throw failed;
                    }
                  }
                });
      } finally {
        daemon.signal("CONT");
      }
      assertTrue(fromRelease[0] != null, "release() threw");
      assertTrue(thrown == fromRelease[0], "the body's own exception comes out: " + thrown);
      assertEquals(0, thrown.getSuppressed().length, "close() added nothing to it");
      assertTrue(thrown.details().contains("no `released` within"), thrown.details());
    }
  }

  @Test
  void closeIsIdempotentAfterAReleaseOrAClose() throws Exception {
    try (Daemon daemon = Daemon.start();
        LockClient client = LockClient.builder(daemon.address).build()) {
      Lease released = client.hold("close/released", Duration.ofSeconds(10));
      assertTrue(released.release(), "was held");
      assertDoesNotThrow(released::close);
      assertDoesNotThrow(released::close);
      assertTrue(released.release(), "release() again gives the same answer");

      Lease closed = client.hold("close/closed", Duration.ofSeconds(10));
      closed.close();
      assertTrue(closed.isLost(), "closing released the lock");
      assertDoesNotThrow(closed::close);
      assertTrue(closed.release(), "the close's answer is kept");
      // The lock is free again for someone else.
      client.release(client.acquire("close/closed", Duration.ofSeconds(1)));
    }
  }
}
