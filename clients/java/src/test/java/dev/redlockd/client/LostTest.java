package dev.redlockd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Every way a Hold session's lock goes away completes {@link Lease#lost()}: the daemon's {@code
 * lost} (three of five masters stopped, the lock flushed from them, or a stopping daemon's grace
 * ran out), and silence (a frozen daemon sends no extension before the
 * validity runs out). Each case has a daemon of its own.
 */
class LostTest {
  @Test
  void threeOfFiveMastersStoppedCompletesLostBeforeTheValidityEnds() throws Exception {
    try (Daemon daemon = Daemon.start();
        LockClient client = LockClient.builder(daemon.address).build()) {
      Lease lease = client.hold("lost/masters", Duration.ofSeconds(3));
      Lock granted = lease.lock();
      assertTrue(granted.fence() > 0);
      for (Daemon.Master master : daemon.masters.subList(2, 5)) {
        master.stop();
      }
      LockLostException reason = Poll.lost(lease);
      long at = System.nanoTime();
      assertEquals("lost", reason.kind());
      // The daemon retries the extension until its validity is nearly out; the client's margin
      // is wider, so its own timer may fire first.
      assertTrue(
          reason.reason().startsWith("lost: ") || reason.reason().contains("no extension arrived"),
          reason.reason());
      assertTrue(at < lease.lock().validUntilNanos(), "told before the last validity ended");
      assertThrows(LockLostException.class, lease::check);
      assertTrue(lease.isLost());
      assertFalse(lease.release(), "nothing left to release");
      lease.close();
    }
  }

  @Test
  void theDaemonsLostCompletesLostAtOnceWhenTheLockVanishedFromAMajority() throws Exception {
    try (Daemon daemon = Daemon.start();
        LockClient client = LockClient.builder(daemon.address).build();
        Lease lease = client.hold("lost/flushed", Duration.ofSeconds(3))) {
      for (Daemon.Master master : daemon.masters.subList(2, 5)) {
        assertEquals("+OK", master.command("FLUSHALL"));
      }
      LockLostException reason = Poll.lost(lease);
      assertTrue(reason.reason().matches("^lost: .*no longer held.*"), reason.reason());
      LockLostException thrown = assertThrows(LockLostException.class, lease::check);
      assertEquals(reason.reason(), thrown.reason());
      assertFalse(lease.release());
    }
  }

  @Test
  void aStoppingDaemonsGraceEndCompletesLost() throws Exception {
    try (Daemon daemon = Daemon.start();
        LockClient client = LockClient.builder(daemon.address).build();
        Lease lease = client.hold("lost/stopping", Duration.ofSeconds(5))) {
      daemon.signal("TERM");
      LockLostException reason = Poll.lost(lease);
      assertTrue(reason.reason().contains("shutdown grace"), reason.reason());
      assertFalse(lease.release(), "nothing left to release");
      daemon.exited().get(Poll.LIMIT.toMillis(), TimeUnit.MILLISECONDS);
    }
  }

  @Test
  void aFrozenDaemonSendsNoExtensionAndLostCompletesBeforeTheValidityEnds() throws Exception {
    try (Daemon daemon = Daemon.start();
        LockClient client = LockClient.builder(daemon.address).deadline(Duration.ofSeconds(2)).build()) {
      Lease lease = client.hold("lost/frozen", Duration.ofSeconds(3));
      daemon.signal("STOP");
      try {
        LockLostException reason = Poll.lost(lease);
        long at = System.nanoTime();
        assertTrue(reason.reason().contains("no extension arrived"), reason.reason());
        // Safe: the work was told to stop while the lock was still valid.
        assertTrue(at < lease.lock().validUntilNanos(), "told before the validity ended");
      } finally {
        daemon.signal("CONT");
      }
      assertFalse(lease.release());
    }
  }
}
